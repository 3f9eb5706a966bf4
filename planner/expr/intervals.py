"""Interval values as columns: PostgreSQL's interval arithmetic vectorised over numpy.

An interval is Arrow's month_day_nano: (int32 months, int32 days, int64 nanoseconds), which
is PostgreSQL's (months, days, microseconds) with the time in nanoseconds (always a whole
number of microseconds here). Every operation reads the three fields straight from the
values buffer (`columns`), computes on int64 / float64 numpy arrays, and builds the result
from buffers (`build`): no Python object per value.

    columns(v, n) -> Fields(months, days, us, valid)       a scalar broadcasts to n rows
    build(fields, scalar) -> Value                         22008 when a field overflows

What PostgreSQL does, and so this module:

* interval ± interval adds field by field; a field past int32 (months, days) is 22008
  "interval out of range".
* interval * float8 and interval / float8 (every number is converted to float8 first, as
  PostgreSQL's only operators are `interval * double precision`): the fractional part of
  the months spills into days (a month is 30 days) and the fraction of the days into the
  time, each rounded to the microsecond (`interval_mul` / `interval_div`).
* justify_hours moves whole 24-hour spans of the time into days, justify_days whole 30-day
  spans of the days into months, justify_interval both with the signs made to agree.
* timestamp ± interval adds the months first (clamped to the month's end: Jan 31 + 1 month
  is Feb 28/29), then the days, then the time; PostgreSQL's timestamp range (4713 BC to
  294276 AD) bounds the result (22008 "timestamp out of range").

Text: `parse_text` reads a text column (the common `'<integer> <unit>'` form with Arrow
kernels, anything else once per distinct value through planner.expr.interval_values'
parser);
`format_text` writes PostgreSQL's output style, once per distinct value.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from planner.errors import SqlError
from planner.expr.arrow_values import combine, Value
from planner.expr.interval_values import (
    interval_text,
    parse_interval,
    UNIT_ALIASES,
    UNIT_SIZES,
    US_PER_DAY,
)
from planner.expr.sqltypes import INTERVAL

_MDN = np.dtype([("m", "<i4"), ("d", "<i4"), ("ns", "<i8")])
_INT32 = (-(2**31), 2**31 - 1)
_DAYS_PER_MONTH = 30
_SECS_PER_DAY = 86_400
# PostgreSQL's timestamp range in microseconds since 1970-01-01: 4714-11-24 00:00 BC up to
# (not including) 294277-01-01 00:00
MIN_TIMESTAMP_US = -211_813_488_000_000_000 + 946_684_800_000_000
END_TIMESTAMP_US = 9_223_371_331_200_000_000 + 946_684_800_000_000


class Fields(NamedTuple):
    """An interval column as int64 numpy fields; `valid` is None when no value is NULL."""

    months: np.ndarray
    days: np.ndarray
    us: np.ndarray
    valid: np.ndarray | None


def rows(*values: Value) -> tuple[int, bool]:
    """The row count of an operation over `values` and whether all of them are scalars."""
    arrays = [v for v in values if not isinstance(v, pa.Scalar)]
    return (len(arrays[0]) if arrays else 1), not arrays


def and_valid(*masks: np.ndarray | None) -> np.ndarray | None:
    """The rows valid in every mask (None: all rows)."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out


def columns(v: Value, n: int) -> Fields:
    """An interval Value's fields over n rows (a scalar repeated, NULL as invalid)."""
    if isinstance(v, pa.Scalar):
        if not v.is_valid or pa.types.is_null(v.type):
            z = np.zeros(n, np.int64)
            return Fields(z, z, z, np.zeros(n, bool))
        mdn = v.as_py()
        return Fields(np.full(n, mdn.months, np.int64), np.full(n, mdn.days, np.int64),
                      np.full(n, mdn.nanoseconds // 1000, np.int64), None)
    a = combine(v)
    if pa.types.is_null(a.type):
        z = np.zeros(n, np.int64)
        return Fields(z, z, z, np.zeros(n, bool))
    raw = np.frombuffer(a.buffers()[1], dtype=_MDN)[a.offset:a.offset + len(a)]
    valid = a.is_valid().to_numpy(zero_copy_only=False) if a.null_count else None
    return Fields(raw["m"].astype(np.int64), raw["d"].astype(np.int64), raw["ns"] // 1000,
                  valid)


def numbers(v: Value, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """A numeric Value as float64 over n rows and its validity (None: no NULLs)."""
    if isinstance(v, pa.Scalar):
        if not v.is_valid:
            return np.zeros(n), np.zeros(n, bool)
        return np.full(n, float(v.as_py())), None
    a = combine(v)
    valid = a.is_valid().to_numpy(zero_copy_only=False) if a.null_count else None
    vals = pc.fill_null(a.cast(pa.float64()), 0.0) if a.null_count else a.cast(pa.float64())
    return vals.to_numpy(zero_copy_only=False), valid


def int64s(v: Value, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """An integer-like Value (int, timestamp, date as days) as int64 over n rows."""
    if isinstance(v, pa.Scalar):
        if not v.is_valid:
            return np.zeros(n, np.int64), np.zeros(n, bool)
        return np.full(n, v.cast(pa.int64()).as_py(), np.int64), None
    a = combine(v)
    valid = a.is_valid().to_numpy(zero_copy_only=False) if a.null_count else None
    a = a.cast(pa.int64())
    vals = pc.fill_null(a, 0) if a.null_count else a
    return vals.to_numpy(zero_copy_only=False).astype(np.int64, copy=False), valid


def build(f: Fields, scalar: bool = False) -> Value:
    """An interval Value from its fields; 22008 if months or days leave int32."""
    months, days, us = (np.asarray(x, np.int64) for x in (f.months, f.days, f.us))
    ok = f.valid
    live_m = months if ok is None else np.where(ok, months, 0)
    live_d = days if ok is None else np.where(ok, days, 0)
    if len(months) and (live_m.min() < _INT32[0] or live_m.max() > _INT32[1]
                        or live_d.min() < _INT32[0] or live_d.max() > _INT32[1]
                        or np.abs(np.where(ok, us, 0) if ok is not None else us).max()
                        > 2**63 // 1000 - 1):
        raise SqlError("interval out of range", "22008")
    raw = np.zeros(len(months), dtype=_MDN)
    raw["m"], raw["d"], raw["ns"] = live_m, live_d, us * 1000
    validity = None if ok is None else pa.array(ok).buffers()[1]
    out = pa.Array.from_buffers(INTERVAL, len(months), [validity, pa.py_buffer(raw)],
                                null_count=-1 if ok is not None else 0)
    return out[0] if scalar else out


def add(a: Fields, b: Fields, sign: int = 1) -> Fields:
    """a + b (sign 1) or a - b (sign -1), field by field."""
    return Fields(a.months + sign * b.months, a.days + sign * b.days, a.us + sign * b.us,
                  and_valid(a.valid, b.valid))


def negate(a: Fields) -> Fields:
    return Fields(-a.months, -a.days, -a.us, a.valid)


def _tsround(x: np.ndarray) -> np.ndarray:
    """PostgreSQL's TSROUND: to the microsecond, in float8 seconds."""
    return np.rint(x * 1e6) / 1e6


def _fits_int32(x: np.ndarray) -> bool:
    return not len(x) or (np.all(np.isfinite(x)) and x.min() >= _INT32[0] and x.max() <= _INT32[1])


def scale(a: Fields, factor: np.ndarray, fvalid: np.ndarray | None, divide: bool) -> Fields:
    """interval * factor or interval / factor as PostgreSQL's interval_mul / interval_div
    compute it, in float8 (0 as a divisor is 22012; a result field past int32 is 22008)."""
    valid = and_valid(a.valid, fvalid)
    live = np.ones(len(factor), bool) if valid is None else valid
    if divide:
        if np.any((factor == 0) & live):
            raise SqlError("division by zero", "22012")
        factor = np.where(live, factor, 1.0)
    if not divide and np.all(np.trunc(factor) == factor) and (
            not len(factor) or np.abs(factor).max() < 2**31):
        # a whole factor (an integer column times an interval): each field times it,
        # exactly, no fraction to spill (the float path gives the same)
        f = factor.astype(np.int64)
        if len(f) and (np.abs(a.us).astype(np.float64) * np.abs(factor)).max() >= 2**62:
            raise SqlError("interval out of range", "22008")
        return Fields(a.months * f, a.days * f, a.us * f, valid)
    with np.errstate(all="ignore"):
        m_f = a.months / factor if divide else a.months * factor
        d_f = a.days / factor if divide else a.days * factor
        if not (_fits_int32(np.where(live, m_f, 0)) and _fits_int32(np.where(live, d_f, 0))):
            raise SqlError("interval out of range", "22008")
        m_f, d_f = np.where(live, m_f, 0), np.where(live, d_f, 0)
        months = np.trunc(m_f)
        days = np.trunc(d_f)
        month_rem_days = _tsround((m_f - months) * _DAYS_PER_MONTH)
        sec_rem = _tsround((d_f - days + month_rem_days - np.trunc(month_rem_days))
                           * _SECS_PER_DAY)
        whole = np.trunc(sec_rem / _SECS_PER_DAY)
        days = days + whole + np.trunc(month_rem_days)
        sec_rem = sec_rem - whole * _SECS_PER_DAY
        t = a.us / factor if divide else a.us * factor
        us = np.rint(np.where(live, t + sec_rem * 1e6, 0))
    if len(us) and not (np.all(np.isfinite(us)) and np.abs(us).max() < 2**62):
        raise SqlError("interval out of range", "22008")
    return Fields(months.astype(np.int64), days.astype(np.int64), us.astype(np.int64), valid)


def justify_hours(a: Fields) -> Fields:
    """Whole 24-hour spans of the time become days; the time keeps the days' sign."""
    days = a.days + np.trunc(a.us / US_PER_DAY).astype(np.int64)
    us = a.us - np.trunc(a.us / US_PER_DAY).astype(np.int64) * US_PER_DAY
    fix_up = (days > 0) & (us < 0)
    fix_down = (days < 0) & (us > 0)
    us = np.where(fix_up, us + US_PER_DAY, np.where(fix_down, us - US_PER_DAY, us))
    days = np.where(fix_up, days - 1, np.where(fix_down, days + 1, days))
    return Fields(a.months, days, us, a.valid)


def justify_days(a: Fields) -> Fields:
    """Whole 30-day spans of the days become months; the days keep the months' sign."""
    whole = np.trunc(a.days / _DAYS_PER_MONTH).astype(np.int64)
    months, days = a.months + whole, a.days - whole * _DAYS_PER_MONTH
    fix_up = (months > 0) & (days < 0)
    fix_down = (months < 0) & (days > 0)
    days = np.where(fix_up, days + 30, np.where(fix_down, days - 30, days))
    months = np.where(fix_up, months - 1, np.where(fix_down, months + 1, months))
    return Fields(months, days, a.us, a.valid)


def justify_interval(a: Fields) -> Fields:
    """justify_days after justify_hours, then the signs of days and time made to agree with
    the months' (PostgreSQL's interval_justify_interval)."""
    wd = np.trunc(a.us / US_PER_DAY).astype(np.int64)
    days, us = a.days + wd, a.us - wd * US_PER_DAY
    whole = np.trunc(days / _DAYS_PER_MONTH).astype(np.int64)
    months, days = a.months + whole, days - whole * _DAYS_PER_MONTH
    pos = (months > 0) & ((days < 0) | ((days == 0) & (us < 0)))
    neg = (months < 0) & ((days > 0) | ((days == 0) & (us > 0)))
    days = np.where(pos, days + 30, np.where(neg, days - 30, days))
    months = np.where(pos, months - 1, np.where(neg, months + 1, months))
    up = (days > 0) & (us < 0)
    down = (days < 0) & (us > 0)
    us = np.where(up, us + US_PER_DAY, np.where(down, us - US_PER_DAY, us))
    days = np.where(up, days - 1, np.where(down, days + 1, days))
    return Fields(months, days, us, a.valid)


def span_us(a: Fields) -> np.ndarray:
    """The interval as microseconds with a month as 30 days (as float64: sum/avg/compare
    need only ordering and PostgreSQL's own avg works in the fields)."""
    return (a.months * _DAYS_PER_MONTH + a.days) * float(US_PER_DAY) + a.us


# -- text ----------------------------------------------------------------------------------

_SIMPLE = r"^\s*(?P<num>[+-]?\d{1,9})\s*(?P<unit>[A-Za-z]+)\s*$"


def parse_text(v: pa.Array, node) -> pa.Array:
    """A text column read as intervals. `'<integer> <unit>'` (what `g || ' seconds'`
    makes) is parsed by Arrow kernels; other strings once per distinct value in Python
    (PostgreSQL's interval syntax has many forms and a column of them repeats few)."""
    a = combine(v)
    n = len(a)
    m = pc.extract_regex(a, _SIMPLE)
    num = pc.struct_field(m, [0])
    unit = pc.utf8_lower(pc.struct_field(m, [1]))
    names = list(UNIT_ALIASES)
    idx = pc.index_in(unit, pa.array(names))
    simple = np.asarray(pc.is_valid(idx).to_numpy(zero_copy_only=False), bool)
    months = np.zeros(n, np.int64)
    days = np.zeros(n, np.int64)
    us = np.zeros(n, np.int64)
    if simple.any():
        k = pc.fill_null(idx, 0).to_numpy(zero_copy_only=False)
        sizes = np.array([UNIT_SIZES[UNIT_ALIASES[u]] for u in names], dtype=np.int64)
        count = pc.fill_null(num.cast(pa.int64(), safe=False), 0).to_numpy(
            zero_copy_only=False)
        sel = sizes[k]
        months = np.where(simple, count * sel[:, 0], 0)
        days = np.where(simple, count * sel[:, 1], 0)
        us = np.where(simple, count * sel[:, 2], 0)
    valid = a.is_valid().to_numpy(zero_copy_only=False)
    rest = valid & ~simple
    if rest.any():
        others = pc.filter(a, pa.array(rest))
        distinct = pc.unique(others)
        # one parse per distinct string: PostgreSQL's interval syntax is not a regex away
        parsed = np.array([parse_interval(s, None, node) for s in distinct.to_pylist()],
                          dtype=np.int64).reshape(-1, 3)
        where = pc.index_in(others, distinct).to_numpy(zero_copy_only=False)
        pos = np.flatnonzero(rest)
        months[pos], days[pos], us[pos] = (parsed[where, i] for i in range(3))
    return build(Fields(months, days, us, None if valid.all() else valid))


def format_text(v: pa.Array) -> pa.Array:
    """Interval column -> PostgreSQL's text ('1 year 2 mons 3 days 04:05:06'), formatted
    once per distinct value (the formatting has many cases; a column of intervals repeats
    few values)."""
    a = combine(v)
    f = columns(a, len(a))
    key = np.stack([f.months, f.days, f.us], axis=1)
    distinct, inverse = np.unique(key, axis=0, return_inverse=True)
    texts = pa.array([interval_text(int(m), int(d), int(u)) for m, d, u in distinct],
                     pa.string())
    out = texts.take(pa.array(np.asarray(inverse).reshape(-1)))
    if f.valid is not None:
        out = pc.if_else(pa.array(f.valid), out, pa.scalar(None, pa.string()))
    return out
