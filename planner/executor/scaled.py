"""Scaled-integer sums of DECIMAL expressions: `sum(price * (1 - disc) * (1 + tax))` (TPC-H
Q01) computed on the unscaled int64 values with numpy, and summed by the hash aggregation
as int64, instead of decimal128 kernels per morsel and a decimal128 hash sum.

Exact or not at all:

- A sum argument qualifies (`plan_sum`) when it is a tree of `+`, `-`, `*` and unary `-`
  over DECIMAL columns of precision <= 18 (their unscaled values are int64), integer
  columns and numeric literals, and every node's declared type (what the decimal
  evaluator gives it, read from an evaluation over no rows) keeps the exact scale
  (`max(s1, s2)` for + and -, `s1 + s2` for *): nothing is rounded, so the integers are
  the values the decimal kernels would give, at the same scale.
- Each morsel proves its values fit (`Tree.values`): a bound on |value| per node from the
  operands' actual min / max (products of bounds, sums of bounds, Python integers). A
  bound that reaches 2**63, or the node's declared precision (where the decimal path
  raises 22003), raises `Fallback`, and the caller runs the whole aggregation again on
  the decimal path; no int64 operation can wrap.
- The sum itself cannot wrap. First (`SINGLE`) the values are summed as one int64
  column while the running total of the morsels' bounds times their rows (`Budget`: the
  largest |sum| any group could reach so far) stays below 2**63; a morsel that would
  take it there raises `Fallback(split=True)`, and the caller runs the aggregation again
  with the split sums (`SPLIT`): each value split into a high part `v >> 32` (|hi| <=
  2**31) and a low part `v & (2**32 - 1)`, summed apart (`split`); both int64 sums are
  exact below 2**31 rows (`MAX_ROWS`, checked by the caller), and `combine` rebuilds
  `hi * 2**32 + lo` exactly as a decimal128(38, scale) - the type Arrow's decimal sum
  gives (`widen` does the same for a single sum). NULL rows are NULL (skipped; a group
  of only NULLs sums to NULL). TPC-H's sums fit the single sum at SF1 and SF10 (Q01's
  largest, sum_charge, bounds at ~1.1e11 per row).
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.types import DataType, to_logical
from planner.expr.core import Const

INT64_LIMIT = 1 << 63
MAX_ROWS = 1 << 31        # rows one aggregation may sum this way (see the module docstring)


SINGLE, SPLIT = "single", "split"     # how the int64 values are summed (module docstring)


class Fallback(Exception):
    """A morsel's values might not fit int64 (or the declared precision): aggregate again
    on the decimal path, which computes (or reports) them exactly. `split`: the values
    fit, only a single int64 sum of them might not: aggregate again with split sums."""

    def __init__(self, split: bool = False):
        super().__init__()
        self.split = split


def next_mode(mode: str | None, e: Fallback) -> str | None:
    """The mode to run an aggregation again in after `e` (None: the decimal path)."""
    return SPLIT if e.split and mode == SINGLE else None


class Budget:
    """Per single-summed argument, the sum so far of each morsel's bound on |value| times
    its rows: an upper bound on |sum| of any group. `add` raises Fallback(split=True)
    before it could reach 2**63 (where Arrow's int64 sum would wrap silently)."""

    __slots__ = ("used",)

    def __init__(self):
        self.used: dict[str, int] = {}

    def add(self, key: str, bound: int, rows: int) -> None:
        used = self.used.get(key, 0) + bound * rows
        if used >= INT64_LIMIT:
            raise Fallback(split=True)
        self.used[key] = used


class Tree:
    """One node of a qualifying expression: a column, a literal or an operation, with its
    declared scale and precision."""

    __slots__ = ("op", "kids", "key", "value", "scale", "precision", "decimal")

    def __init__(self, op: str, scale: int, precision: int | None, kids=(), key=None,
                 value=None, is_decimal: bool = False):
        self.op, self.kids, self.key, self.value = op, list(kids), key, value
        self.scale, self.precision, self.decimal = scale, precision, is_decimal

    def keys(self) -> set[str]:
        """The input columns the tree reads."""
        if self.op == "col":
            return {self.key}
        return set().union(*(k.keys() for k in self.kids)) if self.kids else set()

    def values(self, m, cache: dict) -> tuple[np.ndarray | int, np.ndarray | None, int]:
        """(unscaled int64 values or a Python int for a literal, validity or None for no
        NULL, a bound on |value|) over morsel `m`; raises Fallback where it cannot prove
        that the values fit. `cache`: the morsel's columns already read, by key."""
        if self.op == "lit":
            _check(abs(self.value), None)
            return self.value, None, abs(self.value)
        if self.op == "col":
            got = cache.get(self.key)
            if got is None:
                got = cache[self.key] = _column_ints(m.column(self.key), self.decimal)
            return got
        if self.op == "neg":
            v, valid, b = self.kids[0].values(m, cache)
            return -v, valid, b
        (va, ma, ba), (vb, mb, bb) = (k.values(m, cache) for k in self.kids)
        if self.op == "mul":
            bound = ba * bb
            _check(bound, self.precision)
            v = va * vb
        else:
            fa = 10 ** (self.scale - self.kids[0].scale)
            fb = 10 ** (self.scale - self.kids[1].scale)
            ba, bb = ba * fa, bb * fb
            _check(max(ba, bb), None)
            bound = ba + bb
            _check(bound, self.precision)
            if fa != 1:
                va = va * fa
            if fb != 1:
                vb = vb * fb
            v = va + vb if self.op == "add" else va - vb
        if isinstance(v, np.ndarray) and v.dtype != np.int64:
            v = v.astype(np.int64)
        valid = ma if mb is None else (mb if ma is None else ma & mb)
        return v, valid, bound


def _check(bound: int, precision: int | None) -> None:
    if bound >= INT64_LIMIT or (precision is not None and bound >= 10 ** precision):
        raise Fallback()


def _column_ints(col, is_decimal: bool) -> tuple[np.ndarray, np.ndarray | None, int]:
    """A decimal128 (precision <= 18) or integer column's unscaled int64 values (NULL rows
    0), its validity and the largest |value|."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    if is_decimal:
        # decimal128 is two little-endian int64 words per value, the low one first; with
        # precision <= 18 the value is the low word (the high one its sign)
        words = np.frombuffer(col.buffers()[1], dtype=np.int64)
        v = np.ascontiguousarray(words[2 * col.offset: 2 * (col.offset + n): 2])
    else:
        v = (col.fill_null(0) if col.null_count else col).to_numpy(zero_copy_only=False)
        v = v.astype(np.int64, copy=False)
    valid = None
    if col.null_count:
        valid = col.is_valid().to_numpy(zero_copy_only=False)
        v = np.where(valid, v, 0)           # NULL slots hold anything
    if not n:
        return v, valid, 0
    return v, valid, max(-int(v.min()), int(v.max()))


def plan_sum(e: exp.Expression, type_of, inline: dict) -> Tree | None:
    """The Tree of a sum argument `e` whose result is DECIMAL, or None where it does not
    qualify. `type_of(node)` is the Arrow type the evaluator gives a node (over no rows);
    `inline` maps a shared subexpression's key (the aggregation's prelude) to its
    expression."""
    t = _plan(e, type_of, inline)
    if t is None or not t.decimal or not pa.types.is_decimal128(type_of(e)):
        return None
    return t


def _plan(e, type_of, inline) -> Tree | None:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.Column) and e.name in inline:
        return _plan(inline[e.name], type_of, inline)
    typ = type_of(e)
    if typ is None:
        return None
    if pa.types.is_decimal128(typ) or pa.types.is_decimal256(typ):
        scale, precision, is_dec = typ.scale, typ.precision, True
    elif pa.types.is_integer(typ):
        scale, precision, is_dec = 0, None, False
    else:
        return None
    if isinstance(e, exp.Column):
        if is_dec and not (pa.types.is_decimal128(typ) and precision <= 18):
            return None
        if not is_dec and pa.types.is_unsigned_integer(typ) and typ.bit_width == 64:
            return None
        return Tree("col", scale, precision, key=e.name, is_decimal=is_dec)
    if isinstance(e, (exp.Literal, Const)):
        v = _literal(e)
        if v is None:
            return None
        unscaled = v.scaleb(scale)
        if unscaled != unscaled.to_integral_value():
            return None
        return Tree("lit", scale, precision, value=int(unscaled), is_decimal=is_dec)
    if isinstance(e, exp.Neg):
        if not is_dec:
            return None
        k = _plan(e.this, type_of, inline)
        if k is None or k.scale != scale:
            return None
        return Tree("neg", scale, precision, [k], is_decimal=is_dec)
    op = {exp.Add: "add", exp.Sub: "sub", exp.Mul: "mul"}.get(type(e))
    if op is None or not is_dec:
        return None         # (integer operations keep their own range checks: 22003)
    a, b = _plan(e.left, type_of, inline), _plan(e.right, type_of, inline)
    if a is None or b is None:
        return None
    exact = a.scale + b.scale if op == "mul" else max(a.scale, b.scale)
    if exact != scale:
        return None                       # the evaluator rounds here: not exact
    return Tree(op, scale, precision, [a, b], is_decimal=is_dec)


def _literal(e) -> decimal.Decimal | None:
    if isinstance(e, Const):
        v = e.this.as_py() if isinstance(e.this, pa.Scalar) else None
        if isinstance(v, bool) or not isinstance(v, (int, decimal.Decimal)):
            return None
        return decimal.Decimal(v)
    if e.is_string:
        return None
    try:
        d = decimal.Decimal(e.this)
    except decimal.InvalidOperation:
        return None
    return d if d.is_finite() else None


def split(values, valid, n: int) -> tuple[pa.Array, pa.Array]:
    """The high and low int64 parts of the unscaled values (NULL where `valid` is false)."""
    if not isinstance(values, np.ndarray):           # a constant argument
        values = np.full(n, values, dtype=np.int64)
    # Arrow's kernels (its pooled allocator) rather than two fresh numpy temporaries
    v = _int64s(values, valid)
    return pc.shift_right(v, 32), pc.bit_wise_and(v, 0xFFFFFFFF)


def single(values, valid, n: int) -> pa.Array:
    """The unscaled values as one int64 column (NULL where `valid` is false), for a sum
    the caller's `Budget` proves cannot wrap."""
    if not isinstance(values, np.ndarray):           # a constant argument
        values = np.full(n, values, dtype=np.int64)
    return _int64s(values, valid)


def _int64s(v: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    if valid is not None:
        return pa.array(v, pa.int64(), mask=~valid)
    v = np.ascontiguousarray(v)                        # wrapped, not copied
    return pa.Array.from_buffers(pa.int64(), len(v), [None, pa.py_buffer(v)])


def combine(hi, lo, scale: int) -> pa.Array:
    """hi * 2**32 + lo (the two parts' sums, NULL together) as decimal128(38, scale),
    exactly: built as the two 64-bit words of the 128-bit integer."""
    if isinstance(hi, pa.ChunkedArray):
        hi = hi.combine_chunks()
    if isinstance(lo, pa.ChunkedArray):
        lo = lo.combine_chunks()
    n = len(hi)
    valid = hi.is_valid()
    a = hi.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    b = lo.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    # a * 2**32 + b with 0 <= b < 2**63: the low word is (a mod 2**32) << 32 plus b with
    # its carry; the high word is a >> 32 (arithmetic) plus that carry
    shifted = (a.view(np.uint64) & np.uint64(0xFFFFFFFF)) << np.uint64(32)
    low = shifted + b.view(np.uint64)
    carry = (low < shifted).astype(np.int64)
    high = (a >> 32) + carry
    words = np.empty(2 * n, dtype=np.int64)
    words[0::2] = low.view(np.int64)
    words[1::2] = high
    validity = None if hi.null_count == 0 else valid.buffers()[1]
    return pa.Array.from_buffers(pa.decimal128(38, scale), n,
                                 [validity, pa.py_buffer(words)],
                                 null_count=hi.null_count)


def widen(total, scale: int) -> pa.Array:
    """A single int64 sum (exact: see Budget) as decimal128(38, scale): the conversion a
    scan of a DECIMAL column's unscaled values makes (engine.types.to_logical)."""
    if isinstance(total, pa.ChunkedArray):
        total = total.combine_chunks()
    return to_logical(total, DataType.DECIMAL, 38, scale)
