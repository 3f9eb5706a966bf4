"""Decimal arithmetic (see the package docstring for the result-type rules): kernels on
decimal128 with operands shrunk to the digits they hold, decimal256 when that is not enough,
division and % on unscaled integers, and the one per-row path (38-digit by 38-digit
quotients, with Python's decimal).
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.expr.arrow_values import any_true, broadcast, Value, view_as
from planner.expr.located import error_at
from planner.expr.decimal_types import (
    as_decimal_width,
    cap_precision,
    DECIMAL_CTX,
    decimal_digits,
    decimal_type,
    MAX_PRECISION,
    MAX_PRECISION_256,
    MIN_ADJUSTED_SCALE,
)
from planner.expr.casts import cast_checked, decimal_to_decimal, round_digits


def check_nonzero(b: Value, node: exp.Expr, a: Value | None = None) -> None:
    """22012 where a divisor is zero, counting only rows whose dividend `a` is not NULL
    (NULL / 0 is NULL in PostgreSQL: the operator is strict)."""
    zero = pa.scalar(b.is_valid and b.as_py() == 0) if isinstance(b, pa.Scalar) else \
        pc.equal(b, pa.scalar(0, b.type))
    if a is not None:
        zero = pc.and_(zero, pc.is_valid(a))
    if any_true(zero):
        raise error_at("division by zero", "22012", node)


def _max_unscaled_digits(v: Value) -> int:
    """Digits of the largest |unscaled value| in a decimal value (1 when all null)."""
    if isinstance(v, pa.Scalar):
        values = [v.as_py()]
    else:
        mm = pc.min_max(v)
        values = [mm["min"].as_py(), mm["max"].as_py()]
    scale = v.type.scale
    unscaled = [abs(int(d.scaleb(scale, context=DECIMAL_CTX))) for d in values if d is not None]
    return max([decimal_digits(u) for u in unscaled] + [1])


def _shrink(v: Value) -> Value:
    """Relabel a decimal with the smallest precision its data needs (no data is touched)."""
    t = v.type
    p = max(_max_unscaled_digits(v), t.scale, 1)
    if p >= t.precision:
        return v
    new = pa.decimal128(p, t.scale) if t.bit_width == 128 else pa.decimal256(p, t.scale)
    return view_as(v, new)


def _decimal_result_type(op: str, t1: pa.DataType, t2: pa.DataType) -> pa.DataType:
    p1, s1, p2, s2 = t1.precision, t1.scale, t2.precision, t2.scale
    if op in "+-":
        s = max(s1, s2)
        return cap_precision(max(p1 - s1, p2 - s2) + s + 1, s)
    if op == "*":
        return cap_precision(p1 + p2 + 1, s1 + s2)
    if op == "/":
        s = max(MIN_ADJUSTED_SCALE, s1 + p2 + 1)
        return cap_precision(p1 - s1 + s2 + s, s)
    if op == "//":
        return cap_precision(p1 - s1 + s2 + 1, 0)
    s = max(s1, s2)  # %
    return cap_precision(min(p1 - s1, p2 - s2) + s, s)


def _arrow_decimal_type(op: str, t1: pa.DataType, t2: pa.DataType) -> tuple[int, int]:
    """(precision, scale) Arrow's kernel gives (uncapped); see Arrow's decimal promotion."""
    p1, s1, p2, s2 = t1.precision, t1.scale, t2.precision, t2.scale
    if op in "+-":
        s = max(s1, s2)
        return max(p1 - s1, p2 - s2) + s + 1, s
    if op == "*":
        return p1 + p2 + 1, s1 + s2
    s = max(4, s1 + p2 - s2 + 1)  # divide
    return p1 - s1 + s2 + s, s


def _decimal_kernel(op: str, a: Value, b: Value, node: exp.Expr) -> Value:
    """Arrow's decimal kernel for + - * /, on widths where its exact result cannot overflow."""
    p, _ = _arrow_decimal_type(op, a.type, b.type)
    if p > MAX_PRECISION:
        a, b = _shrink(a), _shrink(b)
        p, _ = _arrow_decimal_type(op, a.type, b.type)
    if p > MAX_PRECISION_256:
        p_a, p_b = a.type.precision, b.type.precision
        if op == "*" and p_a + p_b <= MAX_PRECISION_256:  # |a * b| < 10**76 always fits
            label = min(p_a, MAX_PRECISION_256 - 2)
            return _unchecked_product(a, label, b, MAX_PRECISION_256 - 1 - label)
        raise error_at("numeric field overflow", "22003", node)
    bits = 128 if p <= MAX_PRECISION else 256
    a, b = as_decimal_width(a, bits), as_decimal_width(b, bits)
    kernel = {"+": pc.add, "-": pc.subtract, "*": pc.multiply, "/": pc.divide}[op]
    return kernel(a, b)


def decimal_arith(op: str, a: Value, b: Value, node: exp.Expr) -> Value:
    target = _decimal_result_type(op, a.type, b.type)
    if op in "+-*":
        return decimal_to_decimal(_decimal_kernel(op, a, b, node), target, node)
    if op == "/":
        return decimal_to_decimal(_decimal_quotient(a, b, target.scale + 1, node), target,
                                   node)
    # % and //: integer arithmetic on the unscaled values at the common scale s.
    s = max(a.type.scale, b.type.scale)
    ia, ib = _unscaled(_upscale(a, s, node)), _unscaled(_upscale(b, s, node))
    q = _decimal_quotient(ia, ib, 0, node)
    q = round_digits(q, 0, "towards_zero")
    q = decimal_to_decimal(q, decimal_type(max(q.type.precision - q.type.scale, 1), 0), node)
    if op == "//":
        return decimal_to_decimal(q, target, node)
    r = _decimal_kernel("-", ia, _product_bounded_by(ib, q, node), node)
    return decimal_to_decimal(_relabel(r, s, node), target, node)


def _product_bounded_by(b: Value, q: Value, node: exp.Expr) -> Value:
    """b * q for q = trunc(a / b), exact: |b * q| <= |a| row by row, although the largest b
    and the largest q (from different rows) may together exceed decimal256's 76 digits.

    Arrow's decimal kernels multiply the stored integers without checking them against the
    declared precision, so the operands are relabelled (unchecked views) with precisions
    whose sum fits; every actual product still fits, since |a| has at most 75 digits.
    """
    p, _ = _arrow_decimal_type("*", b.type, q.type)
    if p <= MAX_PRECISION_256:
        return _decimal_kernel("*", b, q, node)
    return _unchecked_product(b, MAX_PRECISION, q, MAX_PRECISION_256 - MAX_PRECISION - 1)


def _unchecked_product(a: Value, label_a: int, b: Value, label_b: int) -> Value:
    """a * b on decimal256 with the operands labelled precision label_a and label_b (sum 75),
    whatever digits they hold: the caller guarantees every product fits in 76 digits."""
    def relabel(v: Value, precision: int) -> Value:
        return view_as(as_decimal_width(v, 256), pa.decimal256(precision, v.type.scale))

    return pc.multiply(relabel(a, label_a), relabel(b, label_b))


def _upscale(v: Value, scale: int, node: exp.Expr) -> Value:
    t = v.type
    if t.scale >= scale:
        return v
    return cast_checked(v, decimal_type(t.precision + scale - t.scale, scale), node)


def _unscaled(v: Value) -> Value:
    """The unscaled integers of a decimal (a zero-copy view at scale 0), minimal precision."""
    t = v.type
    width = pa.decimal128 if t.bit_width == 128 else pa.decimal256
    return _shrink(view_as(v, width(t.precision, 0)))


def _relabel(v: Value, scale: int, node: exp.Expr) -> Value:
    """The same unscaled integers read at another scale (the value times 10**(old - new))."""
    t = v.type
    p = max(t.precision, scale, 1)
    if p > MAX_PRECISION_256:
        raise error_at("numeric field overflow", "22003", node)
    if t.bit_width == 128 and p > MAX_PRECISION:
        v = as_decimal_width(v, 256)
    return view_as(v, (pa.decimal128 if v.type.bit_width == 128 else pa.decimal256)(p, scale))


def _decimal_quotient(a: Value, b: Value, min_scale: int, node: exp.Expr) -> Value:
    """a / b truncated toward zero at a scale of at least `min_scale` (22012 on b = 0).

    Divides the unscaled integers, a / b = (A / B) * 10**(s2 - s1), so the declared scales
    do not inflate the precision of Arrow's kernel (whose quotient scale is max(4, pB + 1)
    for integer operands, and whose dividend it widens by that many digits).
    """
    check_nonzero(b, node, a)
    shift = b.type.scale - a.type.scale
    ia, ib = _unscaled(a), _unscaled(b)
    need = max(min_scale + shift, shift, 0)  # scale of A / B
    k = need - (ib.type.precision + 1)
    if k > 0:
        ia = _upscale(ia, k, node)
    p, _ = _arrow_decimal_type("/", ia.type, ib.type)
    if p > MAX_PRECISION_256:
        q = _python_quotient(ia, ib, need)
    else:
        q = _decimal_kernel("/", ia, ib, node)
    return _relabel(q, q.type.scale - shift, node)


def _python_quotient(a: Value, b: Value, scale: int) -> Value:
    """Truncated a / b with Python's decimal: only for operands that both carry 38
    significant digits, which no Arrow kernel can divide exactly (per row, but rare)."""
    quantum = decimal.Decimal(1).scaleb(-scale)
    t = pa.decimal256(MAX_PRECISION_256, scale)

    def quotient(x: decimal.Decimal | None, y: decimal.Decimal | None) -> decimal.Decimal | None:
        if x is None or y is None:
            return None
        return DECIMAL_CTX.divide(x, y).quantize(quantum, rounding=decimal.ROUND_DOWN,
                                                  context=DECIMAL_CTX)

    if isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar):
        return pa.scalar(quotient(a.as_py(), b.as_py()), t)
    n = len(b) if isinstance(a, pa.Scalar) else len(a)
    xs, ys = broadcast(a, n).to_pylist(), broadcast(b, n).to_pylist()
    return pa.array([quotient(x, y) for x, y in zip(xs, ys)], t)
