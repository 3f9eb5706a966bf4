"""Decimal result types (the rules in the package docstring): precision limits, Spark's cap
(`cap_precision`), integers as decimals, the rounding mode and the context for exact
Python arithmetic. Imports arrow_values only.
"""

from __future__ import annotations

import decimal

import pyarrow as pa

from planner.expr.arrow_values import Value


MAX_PRECISION = 38


MAX_PRECISION_256 = 76


MIN_ADJUSTED_SCALE = 6


DECIMAL_CTX = decimal.Context(prec=200)


DEFAULT_NUMERIC = pa.decimal128(38, 10)  # CAST(x AS NUMERIC) of a non-exact value


HALF_AWAY = "half_towards_infinity"


INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def decimal_type(p: int, s: int) -> pa.DataType:
    return pa.decimal128(p, s) if p <= MAX_PRECISION else pa.decimal256(p, s)


def cap_precision(p: int, s: int) -> pa.DataType:
    """Spark's precision cap: at most 38 digits, dropping scale but keeping min(s, 6)."""
    if p <= MAX_PRECISION:
        return pa.decimal128(max(p, 1), s)
    int_digits = p - s
    s = max(MAX_PRECISION - int_digits, min(s, MIN_ADJUSTED_SCALE))
    return pa.decimal128(MAX_PRECISION, s)


def int_as_decimal_type(t: pa.DataType) -> pa.DataType:
    return pa.decimal128(INT_DIGITS[t.bit_width], 0)


def decimal_digits(n: int) -> int:
    return len(str(abs(n)))


def int_to_decimal(v: Value) -> Value:
    """An integer value as a decimal: a constant gets exactly its digits, a column its width."""
    if isinstance(v, pa.Scalar):
        x = v.as_py()
        t = pa.decimal128(1 if x is None else decimal_digits(x), 0)
        return pa.scalar(None if x is None else decimal.Decimal(x), t)
    return v.cast(int_as_decimal_type(v.type))


def as_decimal_width(v: Value, bits: int) -> Value:
    t = v.type
    if t.bit_width == bits:
        return v
    return v.cast(pa.decimal256(t.precision, t.scale) if bits == 256
                  else pa.decimal128(t.precision, t.scale))
