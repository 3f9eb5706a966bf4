"""Result comparison for the SQL fuzzers: multisets of rows, ordered where ORDER BY fixes
the order, numbers compared across types (int / Decimal / float), floats with a relative
tolerance.

Values are normalised first: every number becomes one kind so that DuckDB's HUGEINT sum
and kudusql's BIGINT sum, or an exact DECIMAL avg and a double avg, compare equal; -0.0 is
0.0; NaN equals NaN; an interval is its length in microseconds (PostgreSQL's interval
equality: a month is 30 days, a day 24 hours), whether it comes as Arrow's MonthDayNano or
a timedelta; a list (DuckDB's array) is its PostgreSQL text form `{1,NULL,"a b"}`, which is
how kudusql's arrays arrive.

The tolerant matcher. A column is *approximate* when either result holds a float or a
Decimal with a fraction in it; the other columns compare exactly (integers, Decimals
holding integers, strings, dates, ...). Floats summed in a different order differ in the
last bits, so approximate values match when they are within a relative tolerance
(`REL`, 1e-6: REAL data is float32 either way) - never by rounding both sides to some
digits, which puts two values a hair apart on either side of a rounding boundary. Rows are
grouped by their exact columns; within a group the approximate columns are matched row to
row (sorted, then, if that pairing fails, a greedy search for a partner within tolerance),
so nearly-equal values in a different order still match.

One oracle artifact is allowed for by position: DuckDB caps DECIMAL at 38 digits and, when
a result type would need more (the sum of a DECIMAL is DECIMAL(38, s); a UNION of it with
a column of a larger scale), it keeps the width and drops scale, rounding to `s` digits
where PostgreSQL's unconstrained NUMERIC keeps them all. For such a column (`tols`: position
-> half a unit of the oracle's last digit) a value matches within that absolute tolerance.
And one deliberate deviation: kudusql keeps date ± interval a DATE (docs/sql.md), so a
difference of two such values is an integer of days where the oracle has an interval; in a
column where our side holds integers and the oracle's whole-day intervals, those intervals
compare as their days (`_days_as_integers`).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal

import pyarrow as pa

REL = 1e-6
ABS = 1e-9

_DAY_US = 86_400_000_000


def _interval_us(v) -> int | None:
    """An interval (Arrow MonthDayNano or timedelta) in microseconds, else None."""
    if isinstance(v, dt.timedelta):
        return (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds
    if type(v).__name__ == "MonthDayNano":
        months, days, ns = v
        return (months * 30 + days) * _DAY_US + ns // 1000
    return None


def _array_elem(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "t" if v else "f"
    s = str(v)
    if (s == "" or s.upper() == "NULL" or any(ch in s for ch in '{}," \\\t\n')):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


def array_text(v: list) -> str:
    """A list as PostgreSQL's text form of a one-dimensional array."""
    return "{" + ",".join(_array_elem(x) for x in v) + "}"


_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_EPOCH = dt.datetime(1970, 1, 1)


def _column_values(col) -> list:
    """An Arrow column as Python values; dates and timestamps outside Python's years 1 to
    9999 (PostgreSQL has them: `DATE '9999-12-31' + 1`) become ("date", days) and
    ("ts", microseconds) instead of failing to convert."""
    t = col.type
    if pa.types.is_date32(t) or pa.types.is_timestamp(t):
        unit = 1 if pa.types.is_date32(t) else {"s": 1_000_000, "ms": 1000, "us": 1,
                                                "ns": 0.001}[t.unit]
        raw = col.cast(pa.int32() if unit == 1 and pa.types.is_date32(t) else pa.int64())
        out = []
        for v in raw.to_pylist():      # a loop per value: fuzzer results are small
            if v is None:
                out.append(None)
            elif pa.types.is_date32(t):
                o = v + _EPOCH_ORDINAL
                out.append(dt.date.fromordinal(o) if 1 <= o <= dt.date.max.toordinal()
                           else ("date", v))
            else:
                us = int(v * unit)
                try:
                    out.append(_EPOCH + dt.timedelta(microseconds=us))
                except OverflowError:
                    out.append(("ts", us))
        return out
    return col.to_pylist()


def arrow_rows(table) -> list[tuple]:
    """An Arrow table's rows as tuples (see _column_values)."""
    if not table.num_columns:
        return [()] * table.num_rows
    return list(zip(*[_column_values(c) for c in table.columns]))


def _approx(v) -> bool:
    return isinstance(v, float) or (isinstance(v, Decimal) and v.is_finite() and
                                    v != v.to_integral_value())


# DuckDB writes '0001-12-02 (BC)' and '0001-12-31 (BC) 22:30:00'; PostgreSQL (and kudusql)
# '0001-12-02 BC' and '0001-12-31 22:30:00 BC'
_DUCKDB_BC = re.compile(r"(\d{4,}-\d\d-\d\d) \(BC\)( \d\d:\d\d:\d\d(?:\.\d+)?)?")


def norm(v):
    """A value -> (sort key, comparable value). Numbers sort by their exact value (a float
    as the Decimal it is), so that near-equal floats sort next to each other."""
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
        return (2, Decimal(f)), f
    if isinstance(v, str):
        if " (BC)" in v:   # DuckDB's text of a year before 1 AD; PostgreSQL's puts BC last
            v = _DUCKDB_BC.sub(r"\1\2 BC", v)
        return (4, v), v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return (5, bytes(v)), bytes(v)
    if isinstance(v, dt.datetime):
        v = v.replace(tzinfo=None)
        return (6, v.isoformat()), v
    if isinstance(v, dt.date):
        # a date is its midnight: kudusql keeps date ± interval (no time part) a DATE where
        # PostgreSQL returns the timestamp at midnight (planner/expr/temporal.py, docs/sql.md)
        v = dt.datetime(v.year, v.month, v.day)
        return (6, v.isoformat()), v
    us = _interval_us(v)
    if us is not None:
        return (9, us), ("interval", us)
    if isinstance(v, tuple) and len(v) == 2 and v[0] in ("date", "ts"):
        # outside Python's years (arrow_rows); a date as its midnight
        us = v[1] * _DAY_US if v[0] == "date" else v[1]
        return (10, us), ("ts", us)
    if isinstance(v, (list, tuple)):
        s = array_text(list(v))
        return (4, s), s
    return (8, repr(v)), v


def same_value(a, b, rel: float = REL, tol: float = ABS) -> bool:
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
        return math.isclose(a, b, rel_tol=rel, abs_tol=tol)
    return a == b


def norm_rows(rows) -> list[tuple[tuple, tuple]]:
    out = []
    for r in rows:
        ks, vs = zip(*(norm(v) for v in r)) if r else ((), ())
        out.append((tuple(ks), tuple(vs)))
    return out


def same_row(a: tuple, b: tuple, rel: float = REL, tols: dict[int, float] | None = None
             ) -> bool:
    if len(a) != len(b):
        return False
    if not tols:
        return all(same_value(x, y, rel) for x, y in zip(a, b))
    return all(same_value(x, y, rel, tols.get(i, ABS)) for i, (x, y) in enumerate(zip(a, b)))


def decimal_tolerances(schema: pa.Schema) -> dict[int, float]:
    """The oracle's DECIMAL(38, s) columns -> half a unit of their last digit (see the
    module docstring: DuckDB rounds there when a type would need more than 38 digits)."""
    return {i: 0.5 * 10.0 ** -f.type.scale for i, f in enumerate(schema)
            if pa.types.is_decimal(f.type) and f.type.precision == 38}


def approximate_columns(*results) -> frozenset[int]:
    """Positions holding a float or a fractional Decimal in any row of any result."""
    cols: set[int] = set()
    for rows in results:
        for r in rows:
            for i, v in enumerate(r):
                if i not in cols and _approx(v):
                    cols.add(i)
    return frozenset(cols)


def _match_group(xs: list[tuple], ys: list[tuple], rel: float,
                 tols: dict[int, float] | None = None) -> tuple | None:
    """Match two equally long lists of normalised rows (equal on the exact columns) within
    tolerance; None if every row found a partner, else the first row of `xs` without."""
    if all(same_row(x, y, rel, tols) for x, y in zip(xs, ys)):
        return None
    free = list(ys)        # greedy: a partner within tolerance for each row in turn
    for x in xs:
        for i, y in enumerate(free):
            if same_row(x, y, rel, tols):
                del free[i]
                break
        else:
            return x
    return None


def multiset_diff(a: list, b: list, approx: frozenset[int], rel: float = REL,
                  tols: dict[int, float] | None = None) -> str | None:
    """`a`, `b`: normalised rows (norm_rows) of equal count."""
    def exact_key(r):
        return tuple(k if i not in approx else () for i, k in enumerate(r[0]))

    def approx_key(r):      # inside a group: sort on the approximate values
        return tuple(k for i, k in enumerate(r[0]) if i in approx)
    ga: dict[tuple, list] = {}
    gb: dict[tuple, list] = {}
    for r in a:
        ga.setdefault(exact_key(r), []).append(r)
    for r in b:
        gb.setdefault(exact_key(r), []).append(r)
    if ga.keys() != gb.keys():
        missing = sorted(ga.keys() ^ gb.keys())[0]
        side = ga if missing in ga else gb
        row = side[missing][0][1]
        return (f"multiset differs: {row!r} only in "
                f"{'the result' if side is ga else 'the expected'}")
    for key, xs in ga.items():
        ys = gb[key]
        if len(xs) != len(ys):
            return (f"multiset differs: {xs[0][1]!r} {len(xs)} times, expected "
                    f"{len(ys)} times")
        if approx:
            xs = [r[1] for r in sorted(xs, key=approx_key)]
            ys = [r[1] for r in sorted(ys, key=approx_key)]
            bad = _match_group(xs, ys, rel, tols)
            if bad is not None:
                return f"multiset differs at {bad!r}, expected one of {ys[:3]!r}"
    return None


def _days_as_integers(ours: list, theirs: list) -> list:
    """`theirs` with whole-day intervals as integer days in the columns where `ours` has
    integers (the module docstring's date ± interval deviation)."""
    cols = {i for r in ours for i, v in enumerate(r) if isinstance(v, int)
            and not isinstance(v, bool)}
    cols &= {i for r in theirs for i, v in enumerate(r) if _interval_us(v) is not None}
    if not cols:
        return theirs

    def fix(i, v):
        us = _interval_us(v) if i in cols else None
        return us // _DAY_US if us is not None and us % _DAY_US == 0 else v
    return [tuple(fix(i, v) for i, v in enumerate(r)) for r in theirs]


def diff_rows(ours, theirs, ordered: list[tuple[int, bool]] | None = None,
              total: bool = False, rel: float = REL,
              tols: dict[int, float] | None = None) -> str | None:
    """None when `ours` matches `theirs`, else a short description of the difference.
    Always a multiset comparison; with `ordered` (ORDER BY positions) the sequence of sort
    keys must match too, and with `total` (the order covers every column) the rows in
    order. `tols`: absolute tolerances by position (decimal_tolerances)."""
    theirs = _days_as_integers(ours, theirs)
    a, b = norm_rows(ours), norm_rows(theirs)
    if len(a) != len(b):
        return f"{len(a)} rows, expected {len(b)}"
    if total:
        for i, ((_, x), (_, y)) in enumerate(zip(a, b)):
            if not same_row(x, y, rel, tols):
                return f"row {i}: {x!r}, expected {y!r}"
        return None
    d = multiset_diff(a, b, approximate_columns(ours, theirs), rel, tols)
    if d is not None:
        return d
    if ordered:
        for i, ((_, x), (_, y)) in enumerate(zip(a, b)):
            kx = tuple(x[p] for p, _ in ordered)
            ky = tuple(y[p] for p, _ in ordered)
            kt = {j: tols[p] for j, (p, _) in enumerate(ordered) if p in tols} if tols else None
            if not same_row(kx, ky, rel, kt):
                return f"order differs at row {i}: keys {kx!r}, expected {ky!r}"
    return None
