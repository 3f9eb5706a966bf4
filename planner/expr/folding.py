"""Constants: `fold_constants` replaces every maximal constant subtree by a `Const`;
`constant_value` / `constant_scalar` / `coerce_literal_to` serve the rules, and
`param_scalar` / `param_index` / `substitute_params` bind statement parameters.
"""

from __future__ import annotations

import decimal
from typing import Any

import pyarrow as pa
from sqlglot import exp

from planner.errors import SqlError
from planner.expr.sqltypes import is_unknown_literal, kind_of
from planner.expr.core import Const, EvalContext, eval_node, HANDLERS, NON_DETERMINISTIC
from planner.expr.casts import cast
from planner.expr.subplans import HostCall, SubPlan


def fold_constants(node: exp.Expression) -> exp.Expression:
    """`node` with each maximal constant subtree replaced by a `Const` (a copy; `node`
    itself when there is nothing to fold).

    A subtree is constant when it has no column, aggregate, subquery, parameter or
    non-deterministic function (random(); now() and current_date do fold). A constant
    subtree whose evaluation raises is left as it is: the error surfaces at execution, and
    only if a row reaches it. Bare literals, aliases and CASE's WHEN arms are never replaced.
    """
    memo: dict[int, bool] = {}
    if not any(_foldable(n, memo) and not _trivially_constant(n) and not _fixed_slot(n)
               for n in node.walk()):
        return node            # nothing to fold (the common case): no copy
    root = node.copy()
    memo = {}
    ctx = EvalContext(pa.table({}))

    def fold(n: exp.Expr) -> exp.Expr:
        if _foldable(n, memo) and not _trivially_constant(n) and not _fixed_slot(n):
            try:
                v = eval_node(n, ctx)
            except SqlError:
                v = None
            if isinstance(v, pa.Scalar):
                c = Const(this=v)
                if n is not root:
                    n.replace(c)
                return c
        for child in list(n.iter_expressions()):
            fold(child)
        return n

    return fold(root)


def param_scalar(v: Any) -> pa.Scalar:
    """A statement parameter's value as a typed scalar. A Python int beyond BIGINT becomes
    NUMERIC (as in PostgreSQL, where such a literal is numeric); beyond 38 digits, 22003."""
    if isinstance(v, pa.Scalar):
        return v
    try:
        return pa.scalar(v)
    except OverflowError:
        if isinstance(v, int) and abs(v) < 10 ** 38:
            return pa.scalar(decimal.Decimal(v), pa.decimal128(38, 0))
        raise SqlError(f"parameter value {v} is out of range", "22003") from None


def param_index(node: exp.Expression) -> int | None:
    """The parameter index of a Const the binder made from `$n` (None for other nodes)."""
    return node.meta_get("param") if isinstance(node, Const) else None


def substitute_params(e: exp.Expression, scalars: list, copy: bool = True) -> exp.Expression:
    """`e` with every parameter Const replaced by the new value (`param_scalar`s) for its
    index: how a cached plan is reused with new parameters."""
    def fix(n):
        i = param_index(n)
        if i is None:
            return n
        c = Const(this=scalars[i])
        c.meta["param"] = i
        return c
    return e.transform(fix, copy=copy)


def constant_value(node: exp.Expression) -> tuple[bool, Any, pa.DataType | None]:
    """(True, python value, Arrow type) if `node` is a constant expression, else (False, None, None).

    Python values are what `pa.Scalar.as_py()` gives (int, Decimal, datetime.date, ...).
    A constant whose evaluation raises, or that has no Python value (a date past year
    9999), counts as not constant.
    """
    while isinstance(node, (exp.Alias, exp.Paren)):
        node = node.this
    s = _constant_scalar(node)
    if s is None:
        return False, None, None
    try:
        return True, s.as_py(), s.type
    except (OverflowError, ValueError):   # a date past year 9999: no Python value, so
        return False, None, None          # it is evaluated, not pushed down


def constant_scalar(node: exp.Expression) -> pa.Scalar | None:
    """The typed value of a constant expression (None if it is not one, or raises)."""
    while isinstance(node, (exp.Alias, exp.Paren)):
        node = node.this
    return _constant_scalar(node)


_NUMBER_KINDS = {"int", "decimal", "float"}
_TIME_KINDS = {"date", "timestamp"}


def coerce_literal_to(value_node: exp.Expression, target_type: pa.DataType) -> Const | None:
    """Cast a constant to a column's type for predicate pushdown, if that loses nothing.

    `'1994-01-01'` -> DATE, `24` -> DECIMAL(15,2), `5` -> INT32 succeed; `1.5` -> INT32,
    `3000000000` -> INT32, a text-typed (non-literal) string -> DATE give None. Comparing
    the column with the result is then equivalent to comparing it with the original value.
    """
    s = _constant_scalar(value_node)
    if s is None:
        return None
    if s.type == target_type:
        return Const(this=s)
    src_kind, dst_kind = kind_of(s.type), kind_of(target_type)
    if src_kind == "string" and dst_kind != "string" and not is_unknown_literal(value_node):
        return None
    if src_kind not in ("string", "null") and src_kind != dst_kind and not (
            {src_kind, dst_kind} <= _NUMBER_KINDS or {src_kind, dst_kind} <= _TIME_KINDS):
        # no implicit cast: `text_col = 1`, `bool_col = 1` are PostgreSQL's 42883, which
        # evaluating the comparison raises; pushed, they were answered (name = '1')
        return None
    try:
        c = cast(s, target_type, value_node)
    except SqlError:
        return None
    if dst_kind == "float" and src_kind in ("decimal", "float", "int"):
        # compared as PostgreSQL compares real with numeric / double: in double precision.
        # REAL 1.1 is not 1.1, though 1.1 cast to REAL and back to NUMERIC(2,1) is
        try:
            exact = cast(s, pa.float64(), value_node).as_py() == \
                cast(c, pa.float64(), value_node).as_py()
        except SqlError:
            return None
        return Const(this=c) if exact else None
    if src_kind not in ("string", "null"):
        try:
            back = cast(c, s.type, value_node)
        except SqlError:
            return None
        if back.as_py() != s.as_py():
            return None
    return Const(this=c)


# -- constants: folding and rendering --------------------------------------------------------

_NEUTRAL = (exp.DataType, exp.DataTypeParam, exp.Var)  # parts of a node, not values


def _foldable(node: exp.Expr, memo: dict[int, bool]) -> bool:
    """Whether `node` is an evaluable expression that depends on no row and no state."""
    key = id(node)
    if key in memo:
        return memo[key]
    t = type(node)
    ok = t in HANDLERS and t not in (exp.Column, exp.Rand, exp.Alias, SubPlan) and not (
        t is exp.Anonymous and node.name.lower() in NON_DETERMINISTIC) and not (
        t is HostCall and node.args["fn"].volatile)
    if ok:
        for child in node.iter_expressions():
            if not (isinstance(child, _NEUTRAL) or _foldable(child, memo)):
                ok = False
                break
    memo[key] = ok
    return ok


def _trivially_constant(node: exp.Expr) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, (exp.Literal, exp.Null, exp.Boolean, Const))


def _fixed_slot(node: exp.Expr) -> bool:
    """A node whose place in its parent needs that node type: CASE's WHEN arms, and the
    [NOT] LIKE under an ESCAPE (folded alone it would be matched without the escape, and
    the ESCAPE left holding a boolean)."""
    if isinstance(node, exp.If) and isinstance(node.parent, exp.Case) and \
            node.arg_key == "ifs":
        return True
    parent = node.parent
    if isinstance(parent, exp.Not):
        parent = parent.parent
    return isinstance(node, (exp.Like, exp.ILike, exp.Not)) and isinstance(parent, exp.Escape) \
        and parent.this is (node if node.parent is parent else node.parent)


def _constant_scalar(node: exp.Expr) -> pa.Scalar | None:
    if not _foldable(node, {}):
        return None
    try:
        v = eval_node(node, EvalContext(pa.table({})))
    except SqlError:
        return None
    return v if isinstance(v, pa.Scalar) else None
