"""Result comparison for the SQL fuzzers: multisets of rows, ordered where ORDER BY fixes
the order, numbers compared across types (int / Decimal / float) with a float tolerance.

Values are normalised first: every number becomes one kind ('n') so that DuckDB's HUGEINT
sum and kudusql's BIGINT sum, or an exact DECIMAL avg and a double avg, compare equal;
-0.0 is 0.0; NaN equals NaN. Integers (and Decimals holding integers) compare exactly;
anything with a fraction or a float compares with a relative tolerance of 1e-9 (1e-6 for
REAL, float32 data widened either way).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

REL = 1e-6


def norm(v):
    """A value -> (sort key, comparable value)."""
    if v is None:
        return (0,), None
    if isinstance(v, bool):
        return (1, v), v
    if isinstance(v, (int, Decimal, float)):
        if isinstance(v, float) and math.isnan(v):
            return (3,), "nan"
        if isinstance(v, float) and math.isinf(v):
            return (2, Decimal(v)), v
        if isinstance(v, Decimal) and v == v.to_integral_value():
            v = int(v)
        if isinstance(v, int):
            return (2, Decimal(v)), v
        f = float(v) + 0.0
        return (2, Decimal(f"{f:.9g}")), f
    if isinstance(v, str):
        return (4, v), v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return (5, bytes(v)), bytes(v)
    if isinstance(v, dt.datetime):
        return (6, v.isoformat()), v.replace(tzinfo=None)
    if isinstance(v, dt.date):
        return (7, v.isoformat()), v
    return (8, repr(v)), v


def same_value(a, b, rel: float = REL) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b and type(a) is type(b)
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)
    return a == b


def norm_rows(rows) -> list[tuple[tuple, tuple]]:
    out = []
    for r in rows:
        ks, vs = zip(*(norm(v) for v in r)) if r else ((), ())
        out.append((tuple(ks), tuple(vs)))
    return out


def same_row(a: tuple, b: tuple, rel: float = REL) -> bool:
    return len(a) == len(b) and all(same_value(x, y, rel) for x, y in zip(a, b))


def diff_rows(ours, theirs, ordered: list[tuple[int, bool]] | None = None,
              total: bool = False, rel: float = REL) -> str | None:
    """None when `ours` matches `theirs`, else a short description of the difference.
    Always a multiset comparison; with `ordered` (ORDER BY positions) the sequence of sort
    keys must match too, and with `total` (the order covers every column) the rows in
    order."""
    a, b = norm_rows(ours), norm_rows(theirs)
    if len(a) != len(b):
        return f"{len(a)} rows, expected {len(b)}"
    if total:
        for i, ((_, x), (_, y)) in enumerate(zip(a, b)):
            if not same_row(x, y, rel):
                return f"row {i}: {x!r}, expected {y!r}"
        return None
    sa, sb = sorted(a, key=lambda r: r[0]), sorted(b, key=lambda r: r[0])
    for (_, x), (_, y) in zip(sa, sb):
        if not same_row(x, y, rel):
            return f"multiset differs at {x!r}, expected {y!r}"
    if ordered:
        for i, ((_, x), (_, y)) in enumerate(zip(a, b)):
            kx = tuple(x[p] for p, _ in ordered)
            ky = tuple(y[p] for p, _ in ordered)
            if not same_row(kx, ky, rel):
                return f"order differs at row {i}: keys {kx!r}, expected {ky!r}"
    return None
