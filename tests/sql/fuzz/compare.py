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

The exact fast path. Most results are equal to the last bit, and normalising every value
of a 200K-row result is what made large worlds slow, so diff_rows first asks plain
equality (`exact_match`): the rows equal in order, or equal as multisets (a Counter) with
the ORDER BY keys equal in order. It only ever says "match", and only when every column
holds one type on both sides from a set whose equality implies the tolerant matcher's
(no True == 1 == 1.0 across types, no NaN, no tz-aware datetime, no list); otherwise, or
when the rows differ, the tolerant matcher decides as before. A reference compared several
times (TLP's predicates, each rule off, pushdown's settings) is an `Expected`: its column
types and normalised rows are worked out once.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
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
    """A value -> (sort key, comparable value). Numbers sort by their exact value, so that
    near-equal floats sort next to each other: the key is the int or float itself (Python
    compares and hashes ints and floats by their exact values, as it would the Decimals
    they are, without building one per value)."""
    if v is None:
        return (0,), None
    if isinstance(v, bool):
        return (1, v), v
    if isinstance(v, (int, Decimal, float)):
        if isinstance(v, float):
            if math.isnan(v):
                return (3,), "nan"
            if math.isinf(v):
                return (2, v), v
        elif isinstance(v, Decimal) and v == v.to_integral_value():
            v = int(v)
        if isinstance(v, int):
            return (2, v), v
        f = float(v) + 0.0
        return (2, f), f
    if isinstance(v, str):
        if " (BC)" in v:   # DuckDB's text of a year before 1 AD; PostgreSQL's puts BC last
            v = _DUCKDB_BC.sub(r"\1\2 BC", v)
        return (4, v), v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return (5, bytes(v)), bytes(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:        # a timestamptz: the instant, in UTC
            v = v.astimezone(dt.timezone.utc)
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


def _is_interval_type(k: type) -> bool:
    return issubclass(k, dt.timedelta) or k.__name__ == "MonthDayNano"


def _days_as_integers(ours: list, theirs: list, types_ours: list | None = None,
                      types_theirs: list | None = None) -> list:
    """`theirs` with whole-day intervals as integer days in the columns where `ours` has
    integers (the module docstring's date ± interval deviation). `types_*`: the results'
    column_types when known (one pass per column instead of one per value)."""
    if types_ours is None or types_theirs is None:
        cols = {i for r in ours for i, v in enumerate(r) if isinstance(v, int)
                and not isinstance(v, bool)}
        cols &= {i for r in theirs for i, v in enumerate(r) if _interval_us(v) is not None}
    else:
        cols = {i for i, (ko, kt) in enumerate(zip(types_ours, types_theirs))
                if int in ko and any(_is_interval_type(k) for k in kt)}
    if not cols:
        return theirs

    def fix(i, v):
        us = _interval_us(v) if i in cols else None
        return us // _DAY_US if us is not None and us % _DAY_US == 0 else v
    return [tuple(fix(i, v) for i, v in enumerate(r)) for r in theirs]


# -- the exact fast path ---------------------------------------------------------------------
# Value types whose equality, between two values of the same type, implies the tolerant
# matcher's (same_value on the normalised values): a float or Decimal equal to another is
# the same number (-0.0 == 0.0 normalise alike too), a date or naive datetime the same
# instant, a timedelta / MonthDayNano the same length. Not here: lists ([1] == [1.0] but
# their array texts differ), tz-aware datetimes (equal instants, different wall clocks once
# the zone is dropped), anything else.
_EXACT_TYPES = frozenset({type(None), bool, int, float, Decimal, str, bytes, dt.date,
                          dt.datetime, dt.timedelta})


def column_types(rows: list) -> list[set] | None:
    """Per column the set of the Python types of its values; None when the rows differ in
    width (the callers then take the slow, value-by-value paths)."""
    return profile(rows)[0]


def profile(rows: list) -> tuple[list[set] | None, list | None]:
    """(column_types, column_kinds) of `rows`, from one transposition."""
    if not rows:
        return [], None
    if len(set(map(len, rows))) != 1:
        return None, None
    cols = list(zip(*rows))
    types = [set(map(type, c)) for c in cols]
    return types, ([_column_kind(c, t) for c, t in zip(cols, types)] if cols else None)


def _column_kind(values, types: set) -> type | None | bool:
    """The one type of a column's non-NULL values if equality on it is exact (see
    _EXACT_TYPES), None for an all-NULL column, False if the column cannot take the fast
    path: mixed types (True == 1 == 1.0 == Decimal(1)), NaN (never equal to itself, the
    tolerant matcher's NaN equals NaN), tz-aware datetimes, lists, ..."""
    kinds = types - {type(None)}
    if not kinds:
        return None
    if len(kinds) != 1:
        return False
    (k,) = kinds
    if k not in _EXACT_TYPES and k.__name__ != "MonthDayNano":
        return False
    try:
        if k is float:
            # NaN (or inf - inf: a false alarm costs only the slow path) makes the sum NaN;
            # filter(None, ...) drops NULLs (and zeros, which change no sum)
            if math.isnan(sum(filter(None, values), 0.0)):
                return False
        elif k is Decimal:
            if not sum(filter(None, values), Decimal(0)).is_finite():
                return False
        elif k is dt.datetime:
            if any(v.tzinfo is not None for v in values if v is not None):
                return False
    except (ArithmeticError, TypeError, ValueError):
        return False
    return k


def column_kinds(rows: list, types: list[set] | None) -> list | None:
    """Per column the _column_kind of `rows` (`types`: their column_types); None when the
    fast path cannot be taken (no rows, no columns, rows of different widths)."""
    if not rows or not types:
        return None
    return [_column_kind(c, t) for c, t in zip(zip(*rows), types)]


def _same_kinds(ka: list | None, kb: list | None) -> bool:
    """Both results' columns fit the fast path and hold the same type (an all-NULL column
    fits any)."""
    if ka is None or kb is None or len(ka) != len(kb):
        return False
    return all(x is not False and y is not False and (x is None or y is None or x is y)
               for x, y in zip(ka, kb))


def exact_match(ours: list, theirs: list, ordered=None, total: bool = False,
                kinds_ours: list | None = None, kinds_theirs: list | None = None) -> bool:
    """True only when the tolerant comparison would find no difference, decided by plain
    equality: the rows equal in order, or (without a total order) equal as multisets
    (Counter) with the ORDER BY keys equal in order. Only for columns of one exact type on
    both sides (_same_kinds; `kinds_*`: column_kinds); False means "not decided here",
    never "different": the tolerant matcher then decides."""
    if len(ours) != len(theirs):
        return False
    if not ours:
        return True
    if not _same_kinds(kinds_ours, kinds_theirs):
        return False
    try:
        if ours == theirs:
            return True
        if total:
            return False
        # dict equality (C) of the two Counters: both hold positive counts only, so it is
        # multiset equality (Counter.__eq__ walks both in Python, ~15x slower)
        if not dict.__eq__(Counter(ours), Counter(theirs)):
            return False
        if ordered:
            pos = [p for p, _ in ordered]
            return all(tuple(x[p] for p in pos) == tuple(y[p] for p in pos)
                       for x, y in zip(ours, theirs))
        return True
    except (TypeError, ArithmeticError, ValueError):    # unhashable, a signalling NaN, ...
        return False


class Expected:
    """A reference result compared several times (TLP's predicates, each rule switched off,
    pushdown's two settings): its column types (fast path) and normalised rows (tolerant
    path) are worked out once, the first time they are needed. Pass it as `theirs` to
    diff_rows."""

    __slots__ = ("rows", "_profile", "_norm", "_approx")

    def __init__(self, rows: list):
        self.rows = rows
        self._profile = self._norm = self._approx = None

    def types(self) -> list[set] | None:
        if self._profile is None:
            self._profile = profile(self.rows)
        return self._profile[0]

    def kinds(self) -> list | None:
        if self._profile is None:
            self._profile = profile(self.rows)
        return self._profile[1]

    def normalised(self) -> list:
        if self._norm is None:
            self._norm = norm_rows(self.rows)
        return self._norm

    def approx(self) -> frozenset[int]:
        if self._approx is None:
            self._approx = _approx_columns(self.rows, self.types())
        return self._approx


def _approx_columns(rows: list, types: list[set] | None) -> frozenset[int]:
    """approximate_columns of one result, by its column_types where known: a column with
    a float is approximate, one with Decimals is if one has a fraction."""
    if types is None:
        return approximate_columns(rows)
    out = set()
    for i, t in enumerate(types):
        if float in t or any(issubclass(k, float) for k in t):
            out.add(i)
        elif any(issubclass(k, Decimal) for k in t):
            if any(_approx(r[i]) for r in rows):
                out.add(i)
    return frozenset(out)


def diff_rows(ours, theirs, ordered: list[tuple[int, bool]] | None = None,
              total: bool = False, rel: float = REL,
              tols: dict[int, float] | None = None, fast: bool = True) -> str | None:
    """None when `ours` matches `theirs`, else a short description of the difference.
    Always a multiset comparison; with `ordered` (ORDER BY positions) the sequence of sort
    keys must match too, and with `total` (the order covers every column) the rows in
    order. `tols`: absolute tolerances by position (decimal_tolerances). `theirs` may be
    an `Expected` (a reference compared several times).

    First the exact fast path (exact_match: plain equality, when the column types make it
    safe; `fast=False` skips it); only when it cannot say "match" are the rows normalised
    and matched with tolerance, so a difference is always found and described by the
    tolerant matcher."""
    ref = theirs if isinstance(theirs, Expected) else Expected(theirs)
    rows = ref.rows
    types_ours, kinds_ours = profile(ours)
    fixed = _days_as_integers(ours, rows, types_ours, ref.types())
    if fixed is not rows:
        ref = Expected(fixed)             # the deviation rewrote it: nothing cached applies
        rows = fixed
    if len(ours) != len(rows):
        return f"{len(ours)} rows, expected {len(rows)}"
    if fast and exact_match(ours, rows, ordered, total, kinds_ours, ref.kinds()):
        return None
    a = norm_rows(ours)
    b = ref.normalised()
    if total:
        for i, ((_, x), (_, y)) in enumerate(zip(a, b)):
            if not same_row(x, y, rel, tols):
                return f"row {i}: {x!r}, expected {y!r}"
        return None
    approx = _approx_columns(ours, types_ours) | ref.approx()
    d = multiset_diff(a, b, approx, rel, tols)
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
