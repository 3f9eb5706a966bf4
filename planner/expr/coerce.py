"""Coercion: bringing operands to one type (`coerce_pair` for comparisons, `unify` for CASE /
COALESCE / VALUES-like lists, `widen` to a supertype, a constant narrowed to its column's
type when exact) and the argument checks of functions (`string_arg`, `int_arg`, ...).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.errors import FeatureNotSupported
from planner.expr.arrow_values import Value
from planner.expr.located import error_at, node_position
from planner.expr.decimal_types import int_to_decimal
from planner.expr.sqltypes import is_unknown_literal, kind_of, NUMERIC_KINDS, pg_name, supertype
from planner.expr.casts import cast


# -- boolean logic and comparisons -----------------------------------------------------------


def boolean_arg(v: Value, what: str, node: exp.Expr) -> Value:
    k = kind_of(v.type)
    if k == "bool":
        return v
    if k == "null":
        return v.cast(pa.bool_())
    raise error_at(f"argument of {what} must be type boolean, not type {pg_name(v.type)}",
               "42804", node)


def coerce_pair(a: Value, a_node: exp.Expr, b: Value, b_node: exp.Expr,
                 op: str, node: exp.Expr) -> tuple[Value, Value]:
    """Bring two operands of a comparison to one type (PostgreSQL's resolution, simplified)."""
    ka, kb = kind_of(a.type), kind_of(b.type)
    if is_unknown_literal(a_node) and kb not in ("string", "null"):
        a, ka = cast(a, b.type, a_node), kb
    elif is_unknown_literal(b_node) and ka not in ("string", "null"):
        b, kb = cast(b, a.type, b_node), ka
    if a.type == b.type:
        return a, b
    if ka == "null":
        return a.cast(b.type), b
    if kb == "null":
        return a, b.cast(a.type)
    if "decimal" in (ka, kb):
        if ka == "int" and isinstance(a, pa.Scalar):
            a = int_to_decimal(a)
        if kb == "int" and isinstance(b, pa.Scalar):
            b = int_to_decimal(b)
    t = supertype([a.type, b.type], operator=True)
    if t is None:
        raise error_at(f"operator does not exist: {pg_name(a.type)} {op} {pg_name(b.type)}",
                   "42883", node)
    # A constant that fits the column's type exactly is cast instead of the column.
    if isinstance(b, pa.Scalar) and not isinstance(a, pa.Scalar) and a.type != t:
        narrowed = narrow_exact(b, a.type)
        if narrowed is not None:
            return a, narrowed
    if isinstance(a, pa.Scalar) and not isinstance(b, pa.Scalar) and b.type != t:
        narrowed = narrow_exact(a, b.type)
        if narrowed is not None:
            return narrowed, b
    return widen(a, t, a_node), widen(b, t, b_node)


def narrow_exact(s: pa.Scalar, t: pa.DataType) -> pa.Scalar | None:
    """`s` cast to `t` if the cast is exact (same family, value preserved), else None."""
    if kind_of(s.type) != kind_of(t) and {kind_of(s.type), kind_of(t)} != {"int", "decimal"}:
        return None
    try:
        c = s.cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return c if c.as_py() == s.as_py() else None


def widen(v: Value, t: pa.DataType, node: exp.Expr | None) -> Value:
    """Cast to a supertype (exact for numbers except into float; date -> timestamp)."""
    if v.type == t:
        return v
    return cast(v, t, node)


def check_comparable(a: Value, op: str, b: Value, node: exp.Expr) -> None:
    if kind_of(a.type) == kind_of(b.type) and kind_of(a.type) in ("interval", "time"):
        return
    if kind_of(a.type) in ("interval", "other", "time") or kind_of(b.type) in ("interval", "other"):
        raise error_at(f"operator does not exist: {pg_name(a.type)} {op} {pg_name(b.type)}",
                   "42883", node)


# -- conditionals ----------------------------------------------------------------------------


def unify(values: list[Value], nodes: list[exp.Expr], what: str,
           node: exp.Expr) -> tuple[list[Value], pa.DataType]:
    """Cast values to one type; unknown literals adopt the others' type (else text)."""
    typed = [v for v, n in zip(values, nodes)
             if not is_unknown_literal(n) and kind_of(v.type) != "null"]
    if any(kind_of(v.type) == "decimal" for v in typed):
        typed = [int_to_decimal(v) if kind_of(v.type) == "int" and isinstance(v, pa.Scalar)
                 else v for v in typed]
    if typed:
        t = supertype([v.type for v in typed])
        if t is None:
            a, b = _first_mismatch([v.type for v in typed])
            raise error_at(f"{what} types {pg_name(a)} and {pg_name(b)} cannot be matched",
                       "42804", node)
    elif any(is_unknown_literal(n) for n in nodes):
        t = pa.string()
    else:
        t = pa.null()
    return [widen(v, t, n) for v, n in zip(values, nodes)], t


def _first_mismatch(types: list[pa.DataType]) -> tuple[pa.DataType, pa.DataType]:
    for i, a in enumerate(types):
        for b in types[i + 1:]:
            if supertype([a, b]) is None:
                return a, b
    return types[0], types[-1]


# -- strings ---------------------------------------------------------------------------------


def string_arg(v: Value, fn: str, node: exp.Expr) -> Value:
    if kind_of(v.type) in ("string", "null"):
        return v
    raise error_at(f"function {fn}({pg_name(v.type)}) does not exist", "42883", node)


def as_text(v: Value, node: exp.Expr, output: bool = False) -> Value:
    """Any value as text: its cast to text (for ||: `true || 'x'` is 'truex'), or with
    `output` its output form (CONCAT, CONCAT_WS: `concat(true)` is 't'), the same but for
    a boolean."""
    k = kind_of(v.type)
    if k == "string":
        return v
    if k == "null":
        return v.cast(pa.string())
    if k == "bool" and output:
        return pc.if_else(v, pa.scalar("t"), pa.scalar("f"))
    return cast(v, pa.string(), node)


def const_arg(v: Value, what: str, node: exp.Expr) -> Any:
    """The Python value of an argument that must be constant (None for NULL)."""
    if not isinstance(v, pa.Scalar):
        raise FeatureNotSupported(f"a non-constant {what} is not supported",
                                  position=node_position(node))
    return v.as_py()


def int_arg(v: Value, what: str, node: exp.Expr) -> int | None:
    if kind_of(v.type) not in ("int", "null", "decimal", "float"):
        raise error_at(f"{what} must be an integer, not type {pg_name(v.type)}", "42804", node)
    x = const_arg(v, what, node)
    return None if x is None else int(cast(v, pa.int64(), node).as_py())


# -- math ------------------------------------------------------------------------------------


def numeric_arg(v: Value, fn: str, node: exp.Expr) -> Value:
    if is_unknown_literal(node):
        return cast(v, pa.float64(), node)
    if kind_of(v.type) in NUMERIC_KINDS:
        return v
    if kind_of(v.type) == "null":
        return v.cast(pa.float64())
    raise error_at(f"function {fn}({pg_name(v.type)}) does not exist", "42883", node)
