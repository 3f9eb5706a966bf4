"""Arithmetic and math: + - * / % over integers (checked), floats and decimals (dispatching to
planner.expr.decimals and to planner.expr.temporal for dates and intervals), unary minus,
ABS, ROUND, TRUNC, FLOOR / CEIL, SIGN, the float functions, LOG, POWER, PI, RANDOM.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.errors import FeatureNotSupported
from planner.expr.arrow_values import any_true, broadcast, combine, Value
from planner.expr.located import error_at, node_position
from planner.expr.decimal_types import cap_precision, HALF_AWAY, int_to_decimal, MAX_PRECISION
from planner.expr.sqltypes import (
    INTERVAL,
    is_unknown_literal,
    kind_of,
    NUMERIC_KINDS,
    pg_name,
    TIMESTAMPTZ,
)
from planner.expr.core import EvalContext, eval_node, Handler, HANDLERS, handles
from planner.expr.casts import cast, cast_checked, to_float64, round_digits
from planner.expr.coerce import int_arg, numeric_arg
from planner.expr.decimals import check_nonzero, decimal_arith
from planner.expr import intervals
from planner.expr.temporal import TEMPORAL_ARITH


# -- arithmetic ------------------------------------------------------------------------------


_ARITH_OPS = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%",
              exp.IntDiv: "//"}


@handles(*_ARITH_OPS)
def _arith_node(node: exp.Binary, ctx: EvalContext) -> Value:
    op = _ARITH_OPS[type(node)]
    a_node, b_node = node.this, node.expression
    a, b = eval_node(a_node, ctx), eval_node(b_node, ctx)
    return _arith(op, a, a_node, b, b_node, node)


def _arith(op: str, a: Value, a_node: exp.Expr, b: Value, b_node: exp.Expr,
           node: exp.Expr) -> Value:
    ka, kb = kind_of(a.type), kind_of(b.type)
    # An unknown literal takes the other operand's type, as PostgreSQL first tries; only
    # date/timestamp + '...' (no date + date) reads it as an interval.
    if is_unknown_literal(a_node) and kb not in ("string", "null"):
        a = cast(a, INTERVAL if kb in ("date", "timestamp") and op == "+" else b.type, a_node)
    elif is_unknown_literal(b_node) and ka not in ("string", "null"):
        b = cast(b, INTERVAL if ka in ("date", "timestamp") and op == "+" else a.type, b_node)
    ka, kb = kind_of(a.type), kind_of(b.type)
    if ka == "null" and kb == "null":
        return pa.scalar(None)
    # NULL takes the other operand's type where that operator exists, as PostgreSQL first
    # tries (date - NULL is date - date: an integer; timestamp - NULL an interval), else
    # the type that makes it exist (date + NULL is date + integer).
    if ka == "null":
        a, ka = a.cast(b.type), kb
    elif kb == "null":
        partner = a.type if op == "-" else {"date": pa.int64(),
                                            "timestamp": INTERVAL}.get(ka, a.type)
        if ka == "interval" and op in ("*", "/"):
            partner = pa.float64()
        b, kb = b.cast(partner), kind_of(partner)
    if ka in NUMERIC_KINDS and kb in NUMERIC_KINDS:
        return _numeric_arith(op, a, b, node)
    if op == "-" and ka in ("date", "timestamp") and kb in ("date", "timestamp") and (
            (ka == "timestamp" and a.type.tz) or (kb == "timestamp" and b.type.tz)):
        # timestamptz - timestamp: the timestamp is local time in the session's zone
        a, b = cast(a, TIMESTAMPTZ, a_node), cast(b, TIMESTAMPTZ, b_node)
        ka = kb = "timestamp"
    fn = TEMPORAL_ARITH.get((ka, op, kb))
    if fn is not None:
        return fn(a, b, node)
    raise error_at(f"operator does not exist: {pg_name(a.type)} {op if op != '//' else '/'} "
               f"{pg_name(b.type)}", "42883", node)


_INT_KERNELS = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}
_FLOAT_KERNELS = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}


def _numeric_arith(op: str, a: Value, b: Value, node: exp.Expr) -> Value:
    kinds = {kind_of(a.type), kind_of(b.type)}
    if "float" in kinds:
        a, b = to_float64(a), to_float64(b)
        if op in _FLOAT_KERNELS:
            return _float_checked(_FLOAT_KERNELS[op](a, b), a, b, op, node)
        check_nonzero(b, node, a)
        q = pc.divide(a, b)
        if op == "/":
            return _float_checked(q, a, b, op, node)
        t = pc.trunc(q)
        return t if op == "//" else pc.subtract(a, pc.multiply(b, t))
    if "decimal" in kinds:
        if kind_of(a.type) == "int":
            a = int_to_decimal(a)
        if kind_of(b.type) == "int":
            b = int_to_decimal(b)
        return decimal_arith(op, a, b, node)
    width = max(a.type.bit_width, b.type.bit_width, 16)
    a, b = a.cast(pa.int64()), b.cast(pa.int64())
    if op in _INT_KERNELS:
        try:
            r = _INT_KERNELS[op](a, b)
        except pa.ArrowInvalid:
            raise error_at("bigint out of range", "22003", node) from None
        return at_int_width(r, width, node)
    if width == 64 and op in ("/", "//") and any_true(pc.and_(pc.equal(a, -2**63),
                                                           pc.equal(b, -1))):
        raise error_at("bigint out of range", "22003", node)
    q = pc.divide_checked(a, b)  # truncates toward zero; raises on a zero divisor
    if op == "%":                # (PostgreSQL: INT_MIN % -1 is 0)
        return at_int_width(pc.subtract(a, pc.multiply(b, q)), width, node)
    return at_int_width(q, width, node)


_INT_NAMES = {16: "smallint", 32: "integer", 64: "bigint"}
_INT_TYPES = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


def at_int_width(r: Value, width: int, node: exp.Expr | None) -> Value:
    """An int64 result as PostgreSQL's int2 / int4 / int8 of `width` bits: the operator
    of the wider operand computes at its width, and a result past it is 22003
    "smallint / integer / bigint out of range" (never a wrap-around)."""
    if width >= 64:
        return r
    lo, hi = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    if isinstance(r, pa.Scalar):
        if r.is_valid and not lo <= r.as_py() <= hi:
            raise error_at(f"{_INT_NAMES[width]} out of range", "22003", node)
    else:
        mm = pc.min_max(r)
        if mm["min"].is_valid and (mm["min"].as_py() < lo or mm["max"].as_py() > hi):
            raise error_at(f"{_INT_NAMES[width]} out of range", "22003", node)
    return r.cast(_INT_TYPES[width])


def _float_checked(r: Value, a: Value, b: Value, op: str, node: exp.Expr) -> Value:
    """PostgreSQL's float8 arithmetic refuses a result that leaves the type's range (22003
    "value out of range: overflow", finite operands and an infinite result; "underflow", a
    product, quotient or power (`op` "^") of non-zero finite values that is 0); IEEE gives
    Infinity and 0."""
    finite = pc.and_(pc.is_finite(a), pc.is_finite(b))
    if any_true(pc.and_(finite, pc.invert(pc.is_finite(r)))):
        raise error_at("value out of range: overflow", "22003", node)
    if op in ("*", "/", "^"):
        lost = pc.and_(pc.and_(finite, pc.equal(r, 0.0)), pc.not_equal(a, 0.0))
        if op == "*":
            lost = pc.and_(lost, pc.not_equal(b, 0.0))
        if any_true(lost):
            raise error_at("value out of range: underflow", "22003", node)
    return r


@handles(exp.Neg)
def _neg(node: exp.Neg, ctx: EvalContext) -> Value:
    v = eval_node(node.this, ctx)
    k = kind_of(v.type)
    if k == "int":
        try:
            r = pc.negate_checked(v.cast(pa.int64()))
        except pa.ArrowInvalid:
            raise error_at("bigint out of range", "22003", node) from None
        return at_int_width(r, max(v.type.bit_width, 16), node)
    if k in ("float", "decimal"):
        return pc.negate(v)
    if k == "null":
        return v
    if k == "interval":
        n, scalar = intervals.rows(v)
        return intervals.build(intervals.negate(intervals.columns(v, n)), scalar)
    raise error_at(f"operator does not exist: - {pg_name(v.type)}", "42883", node)


@handles(exp.Abs)
def _abs(node: exp.Abs, ctx: EvalContext) -> Value:
    v = numeric_arg(eval_node(node.this, ctx), "abs", node.this)
    if kind_of(v.type) == "int":
        try:
            r = pc.abs_checked(v.cast(pa.int64()))
        except pa.ArrowInvalid:
            raise error_at("bigint out of range", "22003", node) from None
        return at_int_width(r, max(v.type.bit_width, 16), node)
    return pc.abs_checked(v)


def _decimal_places(node: exp.Expr, key: str, ctx: EvalContext) -> int:
    arg = node.args.get(key)
    if arg is None:
        return 0
    n = int_arg(eval_node(arg, ctx), "number of decimal places", arg)
    return 0 if n is None else n


def _round_to(v: Value, n: int, mode: str) -> Value:
    """Round (or truncate) to n decimal places; decimals get scale max(min(n, s), 0)."""
    k = kind_of(v.type)
    if k == "int":
        return v.cast(pa.int64()) if n >= 0 else round_digits(v.cast(pa.int64()), n, mode)
    if k == "float":
        return round_digits(to_float64(v), n, mode)
    p, s = v.type.precision, v.type.scale
    if n >= s:
        return v
    new_scale = max(n, 0)
    carry = 0 if mode == "towards_zero" else 1
    target = cap_precision(p - s + new_scale + carry, new_scale)
    return cast_checked(round_digits(v, n, mode), target, None)


@handles(exp.Round)
def _round_node(node: exp.Round, ctx: EvalContext) -> Value:
    v = numeric_arg(eval_node(node.this, ctx), "round", node.this)
    n = _decimal_places(node, "decimals", ctx)
    # round(double precision) is C's rint in PostgreSQL: halves to even (2.5 -> 2, -0.5 ->
    # -0); numeric rounds halves away from zero, and so does a literal like 2.5e0, which
    # is numeric in PostgreSQL (a float here: docs/sql.md, Known limits)
    literal = isinstance(node.this, exp.Literal) and not node.this.is_string
    return _round_to(v, n, "half_to_even" if kind_of(v.type) == "float" and n == 0 and
                     not literal else HALF_AWAY)


@handles(exp.Trunc)
def _trunc(node: exp.Trunc, ctx: EvalContext) -> Value:
    v = numeric_arg(eval_node(node.this, ctx), "trunc", node.this)
    return _round_to(v, _decimal_places(node, "decimals", ctx), "towards_zero")


@handles(exp.Floor, exp.Ceil)
def _floor_ceil(node: exp.Func, ctx: EvalContext) -> Value:
    is_floor = isinstance(node, exp.Floor)
    v = numeric_arg(eval_node(node.this, ctx), "floor" if is_floor else "ceil", node.this)
    k = kind_of(v.type)
    if k == "int":
        return v.cast(pa.int64())
    r = round_digits(v, 0, "down" if is_floor else "up")
    if k == "float":
        return r
    p, s = v.type.precision, v.type.scale
    return cast_checked(r, cap_precision(p - s + 1, 0), node)


@handles(exp.Sign)
def _sign(node: exp.Sign, ctx: EvalContext) -> Value:
    return pc.sign(numeric_arg(eval_node(node.this, ctx), "sign", node.this))


def _float_fn(name: str, kernel: Callable[[Value], Value]) -> Handler:
    def handler(node: exp.Func, ctx: EvalContext) -> Value:
        v = numeric_arg(eval_node(node.this, ctx), name, node.this)
        return kernel(to_float64(v))
    return handler


_FLOAT_FUNCTIONS: dict[type, tuple[str, Callable[[Value], Value]]] = {
    exp.Sqrt: ("sqrt", pc.sqrt_checked),
    exp.Ln: ("ln", pc.ln_checked),
    exp.Exp: ("exp", pc.exp),
    exp.Cbrt: ("cbrt", lambda v: pc.multiply(pc.sign(v), pc.power(pc.abs(v), 1 / 3))),
    exp.Degrees: ("degrees", lambda v: pc.multiply(v, 180 / math.pi)),
    exp.Radians: ("radians", lambda v: pc.multiply(v, math.pi / 180)),
}
for _cls, (_name, _kernel) in _FLOAT_FUNCTIONS.items():
    HANDLERS[_cls] = _float_fn(_name, _kernel)


@handles(exp.Log)
def _log(node: exp.Log, ctx: EvalContext) -> Value:
    if node.expression is None:  # PostgreSQL's one-argument log is base 10
        x = numeric_arg(eval_node(node.this, ctx), "log", node.this)
        return pc.log10_checked(to_float64(x))
    base = to_float64(numeric_arg(eval_node(node.this, ctx), "log", node.this))
    x = to_float64(numeric_arg(eval_node(node.expression, ctx), "log", node.expression))
    return pc.divide(pc.ln_checked(x), pc.ln_checked(base))


@handles(exp.Pow)
def _pow(node: exp.Pow, ctx: EvalContext) -> Value:
    a = to_float64(numeric_arg(eval_node(node.this, ctx), "power", node.this))
    b = to_float64(numeric_arg(eval_node(node.expression, ctx), "power", node.expression))
    if any_true(pc.and_(pc.less(a, 0.0), pc.and_(pc.is_finite(b),
                                             pc.not_equal(pc.trunc(b), b)))):
        raise error_at("a negative number raised to a non-integer power yields a complex result",
                   "2201F", node)
    if any_true(pc.and_(pc.equal(a, 0.0), pc.less(b, 0.0))):
        raise error_at("zero raised to a negative power is undefined", "2201F", node)
    return _float_checked(pc.power(a, b), a, b, "^", node)


@handles(exp.Pi)
def _pi(node: exp.Pi, ctx: EvalContext) -> Value:
    return pa.scalar(math.pi)


@handles(exp.Rand)
def _random(node: exp.Rand, ctx: EvalContext) -> Value:
    if node.this is not None:
        raise FeatureNotSupported("random(seed) is not supported", position=node_position(node))
    return pc.random(ctx.num_rows)


# -- avg of integers -------------------------------------------------------------------------

class IntegerAvg(exp.Expression):
    """avg(x) of an integer x from its sum (`this`, bigint or numeric) and count
    (`expression`): numeric, each value rounded to the scale PostgreSQL's numeric division
    gives it (`integer_avg`). The executor builds it in place of avg's sum / count."""

    arg_types = {"this": True, "expression": True}


_NUMERIC_MIN_SIG_DIGITS = 16       # PostgreSQL's numeric.c
_POW10 = np.array([10 ** k for k in range(19)], dtype=np.int64)


def _base10000(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(weight, first digit) of non-negative int64s in PostgreSQL's base-10000 numeric
    digits (0 has weight 0 and first digit 0)."""
    digits = np.searchsorted(_POW10, a, side="right")     # decimal digits, 0 for 0
    weight = np.maximum(digits - 1, 0) // 4
    return weight, a // _POW10[4 * weight]


def integer_avg(sums: Value, counts: Value) -> pa.Array:
    """sum / count of integers as PostgreSQL's avg computes it (numeric_div): the quotient
    rounded half away from zero at select_div_scale's scale, 16 significant digits counted
    in base-10000 digits: max(16 - 4 * qweight, 0) where qweight is the weight of sum
    less the weight of count, less one when the sum's first digit is at most the count's
    (avg of 1, 2, 2 is 1.6666666666666667, of 0, 0, 1 0.33333333333333333333). Values are
    rounded at their own scale and stored at the largest (an Arrow column has one scale;
    PostgreSQL's text of a smaller-scale value has fewer trailing zeros). NULL where the
    count is 0. Vectorised for sums that fit bigint; a numeric sum past it goes through
    Python's decimal one value at a time (avg of bigints summing past 9.2e18: rare)."""
    s = combine(broadcast(sums, 1) if isinstance(sums, pa.Scalar) else sums)
    c = combine(broadcast(counts, len(s)) if isinstance(counts, pa.Scalar) else counts)
    n = len(s)
    valid = pc.and_(pc.is_valid(s), pc.greater(pc.fill_null(c, 0), 0))
    valid = valid.to_numpy(zero_copy_only=False)
    if pa.types.is_decimal(s.type):
        limit = pa.scalar(2**62, pa.decimal128(19, 0))
        big = pc.fill_null(pc.greater_equal(pc.abs(s), limit), False)
        if pc.any(big).as_py():
            return _python_avg(s, c, valid)
        s = s.cast(pa.int64())
    sv = pc.fill_null(s.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    cv = np.maximum(pc.fill_null(c.cast(pa.int64()), 1).to_numpy(zero_copy_only=False), 1)
    sv, cv = np.where(valid, sv, 0), np.where(valid, cv, 1)
    a = np.abs(sv)
    w1, f1 = _base10000(a)
    w2, f2 = _base10000(cv)
    qweight = w1 - w2 - (f1 <= f2)
    rscale = np.maximum(_NUMERIC_MIN_SIG_DIGITS - 4 * qweight, 0)
    top = int(rscale.max()) if n else 0
    # the quotient truncated one digit past the largest scale (Arrow's decimal division
    # of p1 digits by p2 digits has scale p2 + 1), then each value rounded at its scale:
    # rounding a truncation at a later digit decides as rounding the exact quotient would
    p2 = max(top, len(str(int(cv.max()))) if n else 1, 1)
    t = pc.divide(pa.array(a).cast(pa.decimal256(19, 0)),
                  pa.array(cv).cast(pa.decimal256(19, 0))
                  .cast(pa.decimal256(p2, 0), safe=False))   # (p2 >= the counts' digits)
    int_digits = max(len(str(int((a // cv).max()))) if n else 1, 1)
    scale = min(top, MAX_PRECISION - int_digits)
    out_type = pa.decimal128(int_digits + scale, scale)
    out = pa.nulls(n, out_type)
    negative = pa.array(sv < 0)
    for r in np.unique(rscale):
        rows = pa.array(rscale == r)
        part = pc.round(t.filter(rows), ndigits=int(min(r, scale)),
                        round_mode="half_towards_infinity")
        # (the integer digits were measured: the narrowing cannot lose a digit)
        part = part.cast(pa.decimal256(76, scale), safe=False).cast(out_type, safe=False)
        part = pc.if_else(negative.filter(rows), pc.negate(part), part)
        out = pc.replace_with_mask(out, rows, part)
    return pc.if_else(pa.array(valid), out, pa.scalar(None, out_type))


def _python_avg(s: pa.Array, c: pa.Array, valid: np.ndarray) -> pa.Array:
    """integer_avg with Python's decimal, one value at a time (sums past bigint)."""
    ctx = decimal.Context(prec=120, rounding=decimal.ROUND_HALF_UP)
    out = []
    for total, count, ok in zip(s.to_pylist(), c.to_pylist(), valid):
        if not ok:
            out.append(None)
            continue
        a, cnt = abs(int(total)), int(count)
        w1 = (len(str(a)) - 1) // 4 if a else 0
        f1 = a // 10 ** (4 * w1)
        w2 = (len(str(cnt)) - 1) // 4
        f2 = cnt // 10 ** (4 * w2)
        r = max(_NUMERIC_MIN_SIG_DIGITS - 4 * (w1 - w2 - (f1 <= f2)), 0)
        q = ctx.divide(decimal.Decimal(int(total)), decimal.Decimal(cnt))
        out.append(q.quantize(decimal.Decimal(1).scaleb(-r), context=ctx))
    scale = max((-v.as_tuple().exponent for v in out if v is not None), default=0)
    digits = max((v.adjusted() + 1 for v in out if v is not None), default=1)
    scale = min(scale, MAX_PRECISION - max(digits, 1))
    return pa.array([None if v is None else v.quantize(decimal.Decimal(1).scaleb(-scale),
                                                       context=ctx) for v in out],
                    pa.decimal128(max(digits, 1) + scale, scale))


@handles(IntegerAvg)
def _integer_avg(node: IntegerAvg, ctx: EvalContext) -> Value:
    return integer_avg(eval_node(node.this, ctx), eval_node(node.expression, ctx))
