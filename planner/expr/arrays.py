"""PostgreSQL arrays and JSON building: ARRAY[...], '{a,b}' literals, subscripts, = ANY / <> ALL,
|| on arrays, array_to_string, cardinality / array_length, string_to_array, json_build_object.
The array representation (`ArrayType`) is in planner.expr.sqltypes; the array casts are added to
planner.expr.casts' table here.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.errors import FeatureNotSupported
from planner.expr.arrow_values import broadcast, combine, per_array, Value
from planner.expr.located import error_at, node_position
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
from planner.expr.core import ANONYMOUS, EvalContext, eval_node, HANDLERS, handles, no_function
from planner.expr.casts import cast, CASTS, first_valid_text
from planner.expr.coerce import coerce_pair, const_arg, string_arg, as_text, unify, widen


@handles(exp.DPipe)
def _dpipe(node: exp.DPipe, ctx: EvalContext) -> Value:
    a, b = eval_node(node.this, ctx), eval_node(node.expression, ctx)
    if "list" in (kind_of(a.type), kind_of(b.type)):
        return _array_cat(a, node.this, b, node.expression, node)
    a, b = as_text(a, node.this), as_text(b, node.expression)
    return pc.binary_join_element_wise(a, b, "")


pa.register_extension_type(ArrayType(pa.string()))


def parse_array_literal(text: str) -> list[str | None]:
    """The elements of a one-dimensional array literal: '{a,"b c",NULL}' -> ['a', 'b c',
    None]. Raises ValueError for anything else (nested arrays included)."""
    s = text.strip()
    if len(s) < 2 or s[0] != "{" or s[-1] != "}":
        raise ValueError(text)
    body, out, i = s[1:-1], [], 0
    if not body.strip():
        return out
    while True:
        while i < len(body) and body[i].isspace():
            i += 1
        buf: list[str] = []
        if i < len(body) and body[i] == '"':
            i += 1
            while i < len(body) and body[i] != '"':
                if body[i] == "\\" and i + 1 < len(body):
                    i += 1
                buf.append(body[i])
                i += 1
            if i >= len(body):
                raise ValueError(text)
            i += 1
            out.append("".join(buf))
        else:
            while i < len(body) and body[i] != ",":
                if body[i] in '{}"':
                    raise ValueError(text)
                if body[i] == "\\" and i + 1 < len(body):
                    i += 1
                buf.append(body[i])
                i += 1
            item = "".join(buf).strip()
            if not item:
                raise ValueError(text)
            out.append(None if item.upper() == "NULL" else item)
        while i < len(body) and body[i].isspace():
            i += 1
        if i >= len(body):
            return out
        if body[i] != ",":
            raise ValueError(text)
        i += 1


def _list_from_parts(lengths: np.ndarray, values: pa.Array, null_mask: Value | None
                     ) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    mask = None
    if null_mask is not None:
        mask = combine(null_mask)
        if not mask.null_count and not pc.any(mask).as_py():
            mask = None
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=mask)


def _list_lengths(arr: pa.Array) -> np.ndarray:
    """Element counts of a list array, 0 for NULL lists."""
    return pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False) \
        .astype(np.int64)


def as_array_value(v: Value) -> Value:
    """Arrow list Value -> ArrayType Value."""
    if isinstance(v.type, ArrayType):
        return v
    return wrap_array(array_text(v), ArrayType(v.type.value_type))


def _text_to_list(text: pa.Array, elem: pa.DataType, node: exp.Expr | None) -> pa.Array:
    """Array literals (text) -> Arrow list array of `elem`."""
    inner = pc.utf8_slice_codeunits(pc.utf8_trim_whitespace(text), 1, -1)
    if not pc.any(pc.match_substring_regex(text, r'["\\]|^\s*[^{\s]|[^}\s]\s*$')).as_py():
        parts = pc.split_pattern(inner, pattern=",")          # the common case: no quotes
        empty = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(inner), ""), True)
        lengths = np.where(empty.to_numpy(zero_copy_only=False), 0, _list_lengths(parts))
        keep = pc.invert(pc.take(empty, pc.list_parent_indices(parts)))
        items = pc.utf8_trim_whitespace(pc.list_flatten(parts).filter(keep))
        if pc.any(pc.equal(items, "")).as_py():
            raise error_at(f'malformed array literal: "{first_valid_text(text)}"', "22P02",
                       node)
        items = pc.if_else(pc.equal(pc.utf8_upper(items), "NULL"), null_of(pa.string()),
                           items)
    else:
        lengths_list, flat = [], []
        for t in text.to_pylist():    # per row: only literals with quoted elements
            try:
                elems = parse_array_literal(t) if t is not None else []
            except ValueError:
                raise error_at(f'malformed array literal: "{t}"', "22P02", node) from None
            lengths_list.append(len(elems))
            flat.extend(elems)
        lengths, items = np.array(lengths_list, dtype=np.int64), pa.array(flat, pa.string())
    return _list_from_parts(lengths, cast(items, elem, node), pc.is_null(text))


def _as_list(v: Value, node: exp.Expr | None = None) -> Value:
    """ArrayType (or Arrow list) Value -> Arrow list Value."""
    if not isinstance(v.type, ArrayType):
        return v
    elem = v.type.value_type
    return per_array(lambda a: _text_to_list(combine(array_storage(a)), elem, node), v)


def array_to_list(v: Value) -> Value:
    """An array Value (ArrayType) as an Arrow list Value."""
    return _as_list(v)


def list_to_array(v: Value) -> Value:
    """An Arrow list Value as an array Value (ArrayType)."""
    return as_array_value(v)


def _parse_array_text(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """Text -> array (PostgreSQL's array input, to a canonical text form)."""
    return as_array_value(per_array(lambda a: _text_to_list(a, to.value_type, node), v))


_NEEDS_QUOTES = r'^$|[{}",\\\s]|^[Nn][Uu][Ll][Ll]$'


def array_text(v: Value) -> Value:
    """Arrays (Arrow lists or ArrayType) in PostgreSQL's text form: '{a,"b c",NULL}',
    booleans as t / f."""
    if isinstance(v.type, ArrayType):
        return array_storage(v)

    def one(arr: pa.Array) -> pa.Array:
        elems = pc.list_flatten(arr)
        if kind_of(elems.type) == "bool":
            texts = pc.if_else(elems, "t", "f")
        else:
            texts = cast(elems, pa.string(), None)
        escaped = pc.replace_substring_regex(texts, pattern=r'(["\\])', replacement=r"\\\1")
        quoted = pc.binary_join_element_wise('"', escaped, '"', "")
        texts = pc.fill_null(pc.if_else(pc.match_substring_regex(texts, _NEEDS_QUOTES),
                                        quoted, texts), "NULL")
        joined = pc.binary_join(_list_from_parts(_list_lengths(arr), texts, None), ",")
        out = pc.binary_join_element_wise("{", joined, "}", "")
        return pc.if_else(pc.is_null(arr), null_of(pa.string()), out)
    return per_array(one, v)


def _map_elements(v: Value, fn: Callable[[pa.Array], pa.Array]) -> Value:
    """An array Value with `fn` applied to its elements (an Arrow list result)."""
    def one(arr: pa.Array) -> pa.Array:
        return _list_from_parts(_list_lengths(arr), fn(pc.list_flatten(arr)), pc.is_null(arr))
    return per_array(one, _as_list(v))


def _list_cast(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    if isinstance(v.type, ArrayType) and v.type.value_type == to.value_type:
        return v
    return as_array_value(_map_elements(v, lambda a: cast(a, to.value_type, node)))


def _array_operand(v: Value, node: exp.Expr, elem: pa.DataType | None, what: str) -> Value:
    """`v` as an array: an unknown literal or untyped text parameter is an array literal."""
    k = kind_of(v.type)
    if k == "list":
        return as_array_value(v)
    t = ArrayType(elem if elem is not None and kind_of(elem) not in ("null", "list")
                  else pa.string())
    if k == "null":
        return null_of(t) if isinstance(v, pa.Scalar) else pa.nulls(len(v), t)
    if k == "string":
        return _parse_array_text(v, t, node)
    raise error_at(f"{what} requires array on right side", "42809", node)


def array_equality(a: Value, a_node: exp.Expr, b: Value, b_node: exp.Expr, op: str,
                   node: exp.Expr) -> Value:
    """Array = / <> array (compared by their canonical text forms)."""
    if kind_of(a.type) != "list" and (is_unknown_literal(a_node) or kind_of(a.type) == "null"):
        a = _array_operand(a, a_node, b.type.value_type, op)
    if kind_of(b.type) != "list" and (is_unknown_literal(b_node) or kind_of(b.type) == "null"):
        b = _array_operand(b, b_node, a.type.value_type, op)
    if kind_of(a.type) != "list" or kind_of(b.type) != "list" or op not in ("=", "<>"):
        raise error_at(f"operator does not exist: {pg_name(a.type)} {op} {pg_name(b.type)}",
                   "42883", node)
    eq = pc.equal(array_text(as_array_value(a)), array_text(as_array_value(b)))
    return eq if op == "=" else pc.invert(eq)


def is_quantifier(node: exp.Expr) -> bool:
    """ANY (...) / SOME (...) / ALL (...) on the right of a comparison (sqlglot reads
    `ALL (array)` as a function call)."""
    return isinstance(node, (exp.Any, exp.All)) or (
        isinstance(node, exp.Anonymous) and node.name.lower() in ("all", "any", "some")
        and len(node.expressions) == 1)


def quantified_comparison(node: exp.Binary, ctx: EvalContext, op: str,
                          fn: Callable[..., Value]) -> Value:
    """x op ANY (array) / x op ALL (array), with Kleene logic over the elements."""
    q = node.expression
    is_all = isinstance(q, exp.All) or (isinstance(q, exp.Anonymous) and q.name.lower() == "all")
    inner = q.expressions[0] if isinstance(q, exp.Anonymous) else q.this
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Query):
        raise FeatureNotSupported(f"{op} {'ALL' if is_all else 'ANY'} (subquery) is not "
                                  "supported here", position=node_position(node))
    x = eval_node(node.this, ctx)
    arr = _as_list(_array_operand(eval_node(inner, ctx), inner, x.type,
                                  f"op {'ALL' if is_all else 'ANY'}"), inner)
    if isinstance(arr, pa.Scalar):
        if not arr.is_valid:
            return null_of(pa.bool_())
        result: Value = pa.scalar(is_all)
        elements = arr.values
        for i in range(len(elements)):   # per element of one constant array, not per row
            a, b = coerce_pair(x, node.this, elements[i], q, op, node)
            c = null_of(pa.bool_()) if kind_of(a.type) == "null" else fn(a, b)
            result = (pc.and_kleene if is_all else pc.or_kleene)(result, c)
        return result
    n = ctx.num_rows
    arr = combine(arr)
    parent = pc.list_parent_indices(arr)
    xs = x if isinstance(x, pa.Scalar) else combine(x).take(parent)
    a, b = coerce_pair(xs, node.this, pc.list_flatten(arr), q, op, node)
    c = null_of(pa.bool_()) if kind_of(a.type) == "null" else fn(a, b)
    c = broadcast(c, len(parent))
    decisive = pc.invert(c) if is_all else c          # one such element decides the row
    g = pa.table({"p": parent, "d": pc.fill_null(decisive, False), "u": pc.is_null(c)}) \
        .group_by("p").aggregate([("d", "any"), ("u", "any")])
    hit, unknown = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    rows = g.column("p").to_numpy()
    hit[rows] = g.column("d_any").to_numpy(zero_copy_only=False)
    unknown[rows] = g.column("u_any").to_numpy(zero_copy_only=False)
    out = pa.array(np.where(hit, not is_all, is_all))
    out = pc.if_else(pa.array(~hit & unknown), null_of(pa.bool_()), out)
    return pc.if_else(pc.is_null(arr), null_of(pa.bool_()), out)


@handles(exp.Array)
def _array(node: exp.Array, ctx: EvalContext) -> Value:
    items = node.expressions
    if any(isinstance(i, exp.Query) for i in items):
        raise FeatureNotSupported("ARRAY(subquery) must be planned as a subquery",
                                  position=node_position(node))
    if not items:
        return wrap_array(pa.scalar("{}"), ArrayType(pa.string()))
    values, t = unify([eval_node(e, ctx) for e in items], items, "ARRAY", node)
    if kind_of(t) == "null":
        values, t = [v.cast(pa.string()) for v in values], pa.string()
    if all(isinstance(v, pa.Scalar) for v in values):
        return as_array_value(pa.scalar([v.as_py() for v in values], pa.list_(t)))
    n, k = ctx.num_rows, len(values)
    flat = pa.concat_arrays([combine(broadcast(v, n)) for v in values])
    order = (np.arange(n)[:, None] + np.arange(k)[None, :] * n).ravel()
    return as_array_value(_list_from_parts(np.full(n, k, dtype=np.int64),
                                      flat.take(pa.array(order)), None))


@handles(exp.Bracket)
def _subscript(node: exp.Bracket, ctx: EvalContext) -> Value:
    if len(node.expressions) != 1 or isinstance(node.expressions[0], exp.Slice):
        raise FeatureNotSupported("array slices are not supported", position=node_position(node))
    arr = eval_node(node.this, ctx)
    index_node = node.expressions[0]
    i = eval_node(index_node, ctx)
    if kind_of(arr.type) == "null":
        return arr
    if kind_of(arr.type) != "list":
        raise error_at(f"cannot subscript type {pg_name(arr.type)} because it does not support "
                   "subscripting", "42804", node)
    arr = _as_list(arr, node.this)
    elem = arr.type.value_type
    if kind_of(i.type) not in ("int", "null"):
        i = cast(i, pa.int64(), index_node)
    i = i.cast(pa.int64())
    # sqlglot shifts a literal PostgreSQL subscript to 0-based while parsing (`a[1]` arrives
    # as `a[0]`); any other subscript arrives as written, 1-based.
    if isinstance(index_node, exp.Literal):
        i = pc.add(i, 1)
    if isinstance(arr, pa.Scalar) and isinstance(i, pa.Scalar):
        k = i.as_py()
        if not arr.is_valid or k is None or not 1 <= k <= len(arr.values):
            return null_of(elem)
        return arr.values[k - 1]
    n = ctx.num_rows
    arr = combine(broadcast(arr, n))
    idx = combine(broadcast(i, n))
    if len(arr.values) == 0:
        return pa.nulls(n, elem)
    k = pc.fill_null(idx, 0).to_numpy(zero_copy_only=False)
    ok = (k >= 1) & (k <= _list_lengths(arr))
    starts = arr.offsets.to_numpy()[:-1]
    out = arr.values.take(pa.array(np.where(ok, starts + k - 1, 0)))
    return pc.if_else(pa.array(ok), out, null_of(elem))


def _array_cat(a: Value, a_node: exp.Expr, b: Value, b_node: exp.Expr,
               node: exp.Expr) -> Value:
    """array || array, array || element, element || array (NULL arrays count as empty)."""
    if kind_of(a.type) != "list":
        a = _array_operand(a, a_node, b.type.value_type, "||") if is_unknown_literal(a_node) \
            or kind_of(a.type) == "null" else _as_singleton(a, b.type.value_type, a_node)
    if kind_of(b.type) != "list":
        b = _array_operand(b, b_node, a.type.value_type, "||") if is_unknown_literal(b_node) \
            or kind_of(b.type) == "null" else _as_singleton(b, a.type.value_type, b_node)
    t = supertype([a.type.value_type, b.type.value_type])
    if t is None:
        raise error_at(f"operator does not exist: {pg_name(a.type)} || {pg_name(b.type)}",
                   "42883", node)
    if kind_of(t) == "null":
        t = pa.string()
    a = _as_list(_list_cast(a, ArrayType(t), a_node))
    b = _as_list(_list_cast(b, ArrayType(t), b_node))
    if isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar):
        if not a.is_valid and not b.is_valid:
            return null_of(ArrayType(t))
        return as_array_value(pa.scalar((a.as_py() or []) + (b.as_py() or []), pa.list_(t)))
    n = len(b) if isinstance(a, pa.Scalar) else len(a)
    A, B = combine(broadcast(a, n)), combine(broadcast(b, n))
    la, lb = _list_lengths(A), _list_lengths(B)
    total = la + lb
    rows = np.repeat(np.arange(n), total)
    out_starts = np.concatenate([[0], np.cumsum(total)])[:-1]
    within = np.arange(int(total.sum())) - np.repeat(out_starts, total)
    a_starts = np.concatenate([[0], np.cumsum(la)])[:-1]
    b_starts = np.concatenate([[0], np.cumsum(lb)])[:-1]
    flat_a = pc.list_flatten(A)
    take = np.where(within < la[rows], a_starts[rows] + within,
                    len(flat_a) + b_starts[rows] + within - la[rows])
    values = pa.concat_arrays([flat_a, pc.list_flatten(B)]).take(pa.array(take, pa.int64()))
    return as_array_value(_list_from_parts(total, values, pc.and_(pc.is_null(A), pc.is_null(B))))


def _as_singleton(v: Value, elem: pa.DataType, node: exp.Expr) -> Value:
    v = widen(v, elem, node) if supertype([v.type, elem]) == elem else v
    if isinstance(v, pa.Scalar):
        return as_array_value(pa.scalar([v.as_py()], pa.list_(v.type)))
    return as_array_value(_list_from_parts(np.ones(len(v), dtype=np.int64), combine(v), None))


@handles(exp.ArrayToString)
def _array_to_string(node: exp.ArrayToString, ctx: EvalContext) -> Value:
    arr = _as_list(_array_operand(eval_node(node.this, ctx), node.this, None, "array_to_string"))
    sep = const_arg(eval_node(node.expression, ctx), "delimiter", node.expression)
    null_node = node.args.get("null")
    null_text = const_arg(eval_node(null_node, ctx), "null string", null_node) \
        if null_node is not None else None
    if sep is None:
        return null_of(pa.string())

    def one(a: pa.Array) -> pa.Array:
        texts = cast(pc.list_flatten(a), pa.string(), node)
        lengths = _list_lengths(a)
        if null_text is not None:
            texts = pc.fill_null(texts, null_text)
        else:                       # NULL elements are skipped
            keep = pc.is_valid(texts)
            counts = pa.table({"p": pc.list_parent_indices(a).filter(keep)}) \
                .group_by("p").aggregate([("p", "count")])
            lengths = np.zeros(len(a), dtype=np.int64)
            lengths[counts.column("p").to_numpy()] = counts.column("p_count").to_numpy()
            texts = texts.filter(keep)
        return pc.binary_join(_list_from_parts(lengths, texts, pc.is_null(a)), sep)
    return per_array(one, arr)


def _array_length_fn(fn: str) -> Callable[[exp.Expr, EvalContext], Value]:
    """array_length / array_upper (n), array_lower (1), cardinality; NULL for an empty array
    or another dimension (cardinality of an empty array is 0)."""
    def handler(node: exp.Expr, ctx: EvalContext) -> Value:
        args = node.expressions if isinstance(node, exp.Anonymous) else \
            [node.this] + ([node.expression] if node.expression is not None else [])
        if len(args) != (1 if fn == "cardinality" else 2):
            no_function(fn, args, ctx, node_position(node))
        arr = _as_list(_array_operand(eval_node(args[0], ctx), args[0], None, fn))
        if isinstance(arr, pa.Scalar):
            lengths: Value = pa.scalar(len(arr.values) if arr.is_valid else None, pa.int32())
        else:
            lengths = pc.list_value_length(arr).cast(pa.int32())
        if fn == "cardinality":
            return lengths
        first_dim = pc.equal(eval_node(args[1], ctx).cast(pa.int64()), 1)
        value = pa.scalar(1, pa.int32()) if fn == "array_lower" else lengths
        ok = pc.fill_null(pc.and_(pc.fill_null(first_dim, False), pc.greater(lengths, 0)),
                          False)
        return pc.if_else(ok, value, null_of(pa.int32()))
    return handler


HANDLERS[exp.ArraySize] = _array_length_fn("array_length")


@handles(exp.StringToArray)
def _string_to_array(node: exp.StringToArray, ctx: EvalContext) -> Value:
    s = string_arg(eval_node(node.this, ctx), "string_to_array", node.this)
    sep_node = node.expression
    sep = const_arg(eval_node(sep_node, ctx), "delimiter", sep_node) if sep_node is not None \
        else None
    if sep is None or kind_of(s.type) == "null":
        raise FeatureNotSupported("string_to_array needs a constant delimiter",
                                  position=node_position(node))
    if sep == "":
        return _as_singleton(s, pa.string(), node)
    return as_array_value(pc.split_pattern(s, pattern=sep))


def _json_build_object(node: exp.Anonymous, ctx: EvalContext) -> Value:
    import json
    args = node.expressions
    if len(args) % 2:
        raise error_at("argument list must have even number of elements", "22023", node)
    values = [eval_node(a, ctx) for a in args]
    n = 1 if all(isinstance(v, pa.Scalar) for v in values) else ctx.num_rows
    cols = [combine(broadcast(v, n)).to_pylist() for v in values]
    out = []
    for r in range(n):   # per row: only client catalog queries build JSON objects
        obj = {str(cols[i][r]): _json_value(cols[i + 1][r]) for i in range(0, len(cols), 2)}
        out.append(json.dumps(obj, separators=(", ", " : ")))
    if all(isinstance(v, pa.Scalar) for v in values):
        return pa.scalar(out[0], pa.string())
    return pa.array(out, pa.string())


def _json_value(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    return v


ANONYMOUS.update({
    "array_upper": _array_length_fn("array_upper"),
    "array_lower": _array_length_fn("array_lower"),
    "cardinality": _array_length_fn("cardinality"),
    "json_build_object": _json_build_object,
})


CASTS.update({
    ("string", "list"): lambda v, to, node: _parse_array_text(v, to, node),
    ("list", "string"): lambda v, to, node: array_text(as_array_value(v)).cast(to),
    ("list", "list"): lambda v, to, node: _list_cast(v, to, node),
})
