"""Interval constants: PostgreSQL's interval input (`parse_interval`: units, aliases,
fractions spilling into smaller units) and output (`interval_text`), and one interval as
(months, days, microseconds) (`interval_scalar`, `interval_parts`). Columns of intervals are
planner.expr.intervals'. Imports located only.
"""

from __future__ import annotations

import decimal
import re

import pyarrow as pa
from sqlglot import exp

from planner.errors import SqlError
from planner.expr.located import error_at
from planner.expr.sqltypes import INTERVAL


US_PER_DAY = 86_400_000_000


UNIT_ALIASES = {
    "y": "year", "yr": "year", "yrs": "year", "year": "year", "years": "year",
    "quarter": "quarter", "quarters": "quarter", "qtr": "quarter",
    "mon": "month", "mons": "month", "month": "month", "months": "month",
    "w": "week", "week": "week", "weeks": "week",
    "d": "day", "day": "day", "days": "day",
    "h": "hour", "hr": "hour", "hrs": "hour", "hour": "hour", "hours": "hour",
    "m": "minute", "min": "minute", "mins": "minute", "minute": "minute", "minutes": "minute",
    "s": "second", "sec": "second", "secs": "second", "second": "second", "seconds": "second",
    "ms": "millisecond", "msec": "millisecond", "millisecond": "millisecond",
    "milliseconds": "millisecond", "us": "microsecond", "usec": "microsecond",
    "microsecond": "microsecond", "microseconds": "microsecond",
    "decade": "decade", "decades": "decade", "century": "century", "centuries": "century",
    "millennium": "millennium", "millennia": "millennium", "millenniums": "millennium",
}


# unit -> (months, days, microseconds) per unit
UNIT_SIZES = {
    "millennium": (12000, 0, 0), "century": (1200, 0, 0), "decade": (120, 0, 0),
    "year": (12, 0, 0), "quarter": (3, 0, 0), "month": (1, 0, 0), "week": (0, 7, 0),
    "day": (0, 1, 0), "hour": (0, 0, 3_600_000_000), "minute": (0, 0, 60_000_000),
    "second": (0, 0, 1_000_000), "millisecond": (0, 0, 1_000), "microsecond": (0, 0, 1),
}


_INTERVAL_TOKEN = re.compile(
    r"\s*(?:(?P<tsign>[+-]?)(?P<h>\d+):(?P<mi>\d+)(?::(?P<sec>\d+(?:\.\d*)?))?"
    r"|(?P<num>[+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*(?P<unit>[a-z]+)?|(?P<ago>ago))\s*")


def parse_interval(text: str, unit: str | None, node: exp.Expr | None) -> tuple[int, int, int]:
    """PostgreSQL interval input ('3', unit MONTH; '1 year 2 mons'; '1 day 02:00') ->
    (months, days, microseconds). Fractions spill into smaller units as PostgreSQL does
    (a month is 30 days, a day 24 hours)."""
    def bad() -> SqlError:
        return error_at(f'invalid input syntax for type interval: "{text}"', "22007", node)

    months = days = us = 0
    negate = False
    pos, s = 0, text.strip().lower()
    if not s:
        raise bad()
    while pos < len(s):
        m = _INTERVAL_TOKEN.match(s, pos)
        if m is None or m.end() == pos:
            raise bad()
        pos = m.end()
        if m.group("ago"):
            negate = True
        elif m.group("h") is not None:
            sign = -1 if m.group("tsign") == "-" else 1
            sec = decimal.Decimal(m.group("sec") or 0)
            us += sign * int((int(m.group("h")) * 3600 + int(m.group("mi")) * 60 + sec)
                             * 1_000_000)
        else:
            name = m.group("unit") or unit
            canonical = UNIT_ALIASES.get((name or "second").lower())
            if canonical is None:
                raise bad()
            dm, dd, dus = add_scaled(decimal.Decimal(m.group("num")),
                                      UNIT_SIZES[canonical])
            months, days, us = months + dm, days + dd, us + dus
    if negate:
        months, days, us = -months, -days, -us
    return months, days, us


def add_scaled(n: decimal.Decimal, size: tuple[int, int, int]) -> tuple[int, int, int]:
    m_size, d_size, us_size = size
    months = n * m_size
    whole_m = int(months)
    days = n * d_size + (months - whole_m) * 30
    whole_d = int(days)
    us = n * us_size + (days - whole_d) * US_PER_DAY
    return whole_m, whole_d, int(us.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def interval_scalar(months: int, days: int, us: int) -> pa.Scalar:
    return pa.scalar(pa.MonthDayNano([months, days, us * 1000]), INTERVAL)


def interval_parts(v: pa.Scalar) -> tuple[int, int, int]:
    mdn = v.as_py()
    return mdn.months, mdn.days, mdn.nanoseconds // 1000


def interval_text(months: int, days: int, us: int) -> str:
    """PostgreSQL's output style (IntervalStyle postgres, EncodeInterval): '1 year 2 mons
    3 days 04:05:06'; a unit is singular only for exactly 1 ('-1 years'), and after a
    negative field a positive one carries a '+' ('-1 days +02:00:00')."""
    parts = []
    before = False                   # the previous field was negative
    years = int(months / 12)
    for n, unit in ((years, "year"), (months - 12 * years, "mon"), (days, "day")):
        if n:
            parts.append(f"{'+' if parts and before and n > 0 else ''}{n} {unit}"
                         f"{'' if n == 1 else 's'}")
            before = n < 0
    if us or not parts:
        sign = "-" if us < 0 else ("+" if parts and before else "")
        secs, frac = divmod(abs(us), 1_000_000)
        text = f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
        parts.append(text + (f".{frac:06d}".rstrip("0") if frac else ""))
    return " ".join(parts)
