"""Dates, timestamps and intervals: interval literals, calendar arithmetic on float64 numpy
arrays (months clamp to the month end), EXTRACT, DATE_TRUNC and the current time functions.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import decimal
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.dialect import KuduDatePart, KuduNow
from planner.errors import FeatureNotSupported, SqlError
from planner.expr.arrow_values import ints_and_mask, per_array, Value, view_as
from planner.expr.located import error_at, node_position
from planner.expr.interval_values import (
    interval_parts,
    interval_scalar,
    parse_interval,
    UNIT_ALIASES,
    US_PER_DAY,
)
from planner.expr.sqltypes import (
    INTERVAL,
    is_unknown_literal,
    kind_of,
    null_of,
    pg_name,
    TIMESTAMP,
)
from planner.expr.core import ANONYMOUS, EvalContext, eval_node, handles, no_function
from planner.expr.casts import TIME, cast, cast_checked
from planner.expr import intervals, timezones


@handles(exp.Interval)
def _interval(node: exp.Interval, ctx: EvalContext) -> Value:
    v = node.this
    unit = node.args.get("unit")
    unit_name = unit.name if unit is not None else None
    if not isinstance(v, exp.Literal):
        raise FeatureNotSupported("INTERVAL needs a literal", position=node_position(node))
    return interval_scalar(*parse_interval(str(v.this), unit_name, node))


# Calendar arithmetic runs on float64 arrays: numpy's int64 floor division is not vectorised
# and is ~10x slower, while every intermediate here is an integer far below 2**53, so float
# quotients floor exactly.


def _fdiv(a: np.ndarray, c: int) -> np.ndarray:
    return np.floor(a / c)


def _civil_from_days(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Days since 1970-01-01 -> proleptic Gregorian (year, month, day); H. Hinnant's algorithm."""
    z = z + 719_468.0
    era = _fdiv(z, 146_097)
    doe = z - era * 146_097
    yoe = _fdiv(doe - _fdiv(doe, 1460) + _fdiv(doe, 36_524) - _fdiv(doe, 146_096), 365)
    doy = doe - (365 * yoe + _fdiv(yoe, 4) - _fdiv(yoe, 100))
    mp = _fdiv(5 * doy + 2, 153)
    day = doy - _fdiv(153 * mp + 2, 5) + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    return yoe + era * 400 + (month <= 2), month, day


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    y = y - (m <= 2)
    era = _fdiv(y, 400)
    yoe = y - era * 400
    mp = np.where(m > 2, m - 3, m + 9)
    doy = _fdiv(153 * mp + 2, 5) + d - 1
    doe = yoe * 365 + _fdiv(yoe, 4) - _fdiv(yoe, 100) + doy
    return era * 146_097 + doe - 719_468


_MONTH_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.float64)


def _month_length(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Days in month m (1-12) of proleptic Gregorian year y (astronomical: 0 is 1 BC)."""
    leap = (np.fmod(y, 4) == 0) & ((np.fmod(y, 100) != 0) | (np.fmod(y, 400) == 0))
    return _MONTH_DAYS[(m - 1).astype(np.int64)] + ((m == 2) & leap)


def _add_months_days(days: np.ndarray, months: int) -> np.ndarray:
    """Days since epoch (int64) + `months` calendar months, clamped to the month end."""
    y, m, d = _civil_from_days(days.astype(np.float64))
    total = y * 12 + (m - 1) + months
    y = _fdiv(total, 12)
    m = total - y * 12 + 1
    return _days_from_civil(y, m, np.minimum(d, _month_length(y, m))).astype(np.int64)


def _shift_days_by_months(days: np.ndarray, months: int) -> np.ndarray:
    """`_add_months_days`, through a lookup table over the value range when that is shorter
    than the input (dates cluster: TPC-H's span 2,500 days for 6M rows)."""
    if not len(days):
        return days
    lo, hi = int(days.min()), int(days.max())
    if hi - lo >= len(days):
        return _add_months_days(days, months)
    table = _add_months_days(np.arange(lo, hi + 1, dtype=np.int64), months)
    return table[days - lo]


def _shift_dates(a: pa.Array, months: int, days: int) -> pa.Array:
    vals, mask = ints_and_mask(a.cast(pa.int32()), "int64")
    if months:
        vals = _shift_days_by_months(vals, months)
    vals = vals + days
    if len(vals) and (vals.min() < -(2**31) or vals.max() >= 2**31):
        raise SqlError("date out of range", "22008")
    return pa.array(vals.astype(np.int32), mask=mask).cast(pa.date32())


def shift_timestamps(a: pa.Array, months: int, days: int, us: int) -> pa.Array:
    unit_type = a.type
    vals, mask = ints_and_mask(a.cast(pa.int64()), "int64")
    if months:
        day, tod = np.divmod(vals, US_PER_DAY)
        vals = _shift_days_by_months(day, months) * US_PER_DAY + tod
    vals = vals + (days * US_PER_DAY + us)
    return pa.array(vals, mask=mask).cast(unit_type)


def _temporal_plus_interval(t: Value, iv: Value, node: exp.Expr, sign: int = 1) -> Value:
    if kind_of(t.type) == "timestamp" and t.type.tz:
        return _zoned_plus_interval(t, iv, node, sign)
    if isinstance(iv, pa.Scalar):
        if not iv.is_valid:
            return null_of(t.type if kind_of(t.type) == "timestamp" else TIMESTAMP)
        months, days, us = (sign * x for x in interval_parts(iv))
        if kind_of(t.type) == "date" and us == 0:
            return per_array(lambda a: _shift_dates(a, months, days), t)
        ts = t.cast(TIMESTAMP) if kind_of(t.type) == "date" or t.type.unit != "us" else t
        return per_array(lambda a: shift_timestamps(a, months, days, us), ts)
    # an interval column: months, days and time per row, vectorised the same way
    n, scalar = intervals.rows(t, iv)
    f = intervals.columns(iv, n)
    if sign < 0:
        f = intervals.negate(f)
    ts = t.cast(TIMESTAMP) if kind_of(t.type) == "date" or t.type.unit != "us" else t
    vals, tvalid = intervals.int64s(ts, n)
    out = shift_timestamp_us(vals, f.months, f.days, f.us)
    valid = intervals.and_valid(tvalid, f.valid)
    _check_timestamp_range(out, valid, node)
    arr = pa.array(out, TIMESTAMP, mask=None if valid is None else ~valid)
    return arr[0] if scalar else arr


def _zoned_plus_interval(t: Value, iv: Value, node: exp.Expr, sign: int) -> Value:
    """timestamptz ± interval as PostgreSQL adds it: the months and days to the local
    time in the session's zone (a day across a DST change is 23 or 25 hours), then the
    time to the instant."""
    n, scalar = intervals.rows(t, iv)
    f = intervals.columns(iv, n)
    if sign < 0:
        f = intervals.negate(f)
    vals, tvalid = intervals.int64s(t.cast(timezones.TIMESTAMPTZ), n)
    valid = intervals.and_valid(tvalid, f.valid)
    if np.any(f.months != 0) or np.any(f.days != 0):
        local, _ = intervals.int64s(timezones.to_local(pa.array(vals, timezones.TIMESTAMPTZ)),
                                    n)
        local = shift_timestamp_us(local, f.months, f.days, 0)
        _check_timestamp_range(local, valid, node)
        vals, _ = intervals.int64s(timezones.to_utc(pa.array(local, TIMESTAMP)), n)
    out = vals + f.us
    _check_timestamp_range(out, valid, node)
    arr = pa.array(out, timezones.TIMESTAMPTZ, mask=None if valid is None else ~valid)
    return arr[0] if scalar else arr


def shift_timestamp_us(vals: np.ndarray, months, days, us) -> np.ndarray:
    """Microseconds since the epoch + an interval per row (or one): the months first,
    clamped to the month's end, then the days, then the time (PostgreSQL's
    timestamp_pl_interval for a timestamp without time zone)."""
    months = np.asarray(months, np.int64)
    if np.any(months != 0):
        day, tod = np.divmod(vals, US_PER_DAY)
        y, m, d = _civil_from_days(day.astype(np.float64))
        total = y * 12 + (m - 1) + months
        y = _fdiv(total, 12)
        m = total - y * 12 + 1
        day = _days_from_civil(y, m, np.minimum(d, _month_length(y, m))).astype(np.int64)
        vals = day * US_PER_DAY + tod
    with np.errstate(over="ignore"):
        return vals + (np.asarray(days, np.int64) * US_PER_DAY + np.asarray(us, np.int64))


def _check_timestamp_range(vals: np.ndarray, valid: np.ndarray | None, node: exp.Expr) -> None:
    live = vals if valid is None else vals[valid]
    if len(live) and (live.min() < intervals.MIN_TIMESTAMP_US
                      or live.max() >= intervals.END_TIMESTAMP_US):
        raise error_at("timestamp out of range", "22008", node)


def _date_plus_int(d: Value, n: Value, node: exp.Expr, sign: int = 1) -> Value:
    n = n.cast(pa.int64())
    days = d.cast(pa.int32()).cast(pa.int64())
    r = pc.add_checked(days, n) if sign > 0 else pc.subtract_checked(days, n)
    return cast_checked(r, pa.int32(), node).cast(pa.date32())


def _date_minus_date(a: Value, b: Value, node: exp.Expr) -> Value:
    return pc.subtract(a.cast(pa.int32()).cast(pa.int64()), b.cast(pa.int32()).cast(pa.int64()))


def _interval_array(months, days, nanos, valid: np.ndarray | None) -> pa.Array:
    """An INTERVAL (month_day_nano) array from numpy columns, NULL where `valid` is False
    (None: no NULLs), built from its buffers: no Python object per value."""
    raw = np.zeros(len(nanos), dtype=[("m", "<i4"), ("d", "<i4"), ("ns", "<i8")])
    raw["m"], raw["d"], raw["ns"] = months, days, nanos
    validity = None if valid is None else pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(INTERVAL, len(nanos), [validity, pa.py_buffer(raw)])


def _timestamp_minus_timestamp(a: Value, b: Value, node: exp.Expr) -> Value:
    """An interval of whole days plus time, both with the sign of the difference."""
    a, b = a.cast(TIMESTAMP), b.cast(TIMESTAMP)
    diff = pc.subtract_checked(a.cast(pa.int64()), b.cast(pa.int64()))

    def to_interval(arr: pa.Array) -> pa.Array:
        vals, mask = ints_and_mask(arr, "int64")
        days = np.trunc(vals / US_PER_DAY).astype(np.int64)
        rest = vals - days * US_PER_DAY
        return _interval_array(0, days, rest * 1000, None if mask is None else ~mask)

    return per_array(to_interval, diff)


def _interval_arith(op: str) -> Callable[[Value, Value, exp.Expr], Value]:
    """interval ± interval, interval * number, number * interval, interval / number, for
    constants and columns alike (planner.expr.intervals)."""
    def fn(a: Value, b: Value, node: exp.Expr) -> Value:
        n, scalar = intervals.rows(a, b)
        try:
            if op in "+-":
                f = intervals.add(intervals.columns(a, n), intervals.columns(b, n),
                                  1 if op == "+" else -1)
            else:
                iv, num = (a, b) if kind_of(a.type) == "interval" else (b, a)
                factor, fvalid = intervals.numbers(num, n)
                f = intervals.scale(intervals.columns(iv, n), factor, fvalid, op == "/")
            return intervals.build(f, scalar)
        except SqlError as e:
            raise error_at(e.message, e.sqlstate, node) from None
    return fn


def _time_plus_interval(t: Value, iv: Value, node: exp.Expr, sign: int = 1) -> Value:
    """time ± interval: the interval's time part, wrapping around midnight (its months and
    days do not move a time of day, as in PostgreSQL)."""
    n, scalar = intervals.rows(t, iv)
    f = intervals.columns(iv, n)
    us, mask = ints_and_mask(_column(t, n).cast(pa.int64()), "int64")
    out = np.mod(us + sign * f.us, US_PER_DAY)
    valid = intervals.and_valid(f.valid, None if mask is None else ~mask)
    arr = pa.array(out, pa.int64(), mask=None if valid is None else ~valid).cast(TIME)
    return arr[0] if scalar else arr


def _column(v: Value, n: int) -> pa.Array:
    """A value as an array of n rows (a constant repeated)."""
    if isinstance(v, pa.Scalar):
        return pa.repeat(v, n)
    return v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v


def _time_minus_time(a: Value, b: Value, node: exp.Expr) -> Value:
    """time - time: an interval of the difference's microseconds (no days)."""
    diff = pc.subtract(a.cast(pa.int64()), b.cast(pa.int64()))

    def to_interval(arr: pa.Array) -> pa.Array:
        vals, mask = ints_and_mask(arr, "int64")
        return _interval_array(0, 0, vals * 1000, None if mask is None else ~mask)

    return per_array(to_interval, diff)


def _date_plus_time(d: Value, t: Value, node: exp.Expr) -> Value:
    """date + time: the timestamp of that time on that day."""
    days = d.cast(pa.int32()).cast(pa.int64())
    return pc.add(pc.multiply(days, US_PER_DAY), t.cast(pa.int64())).cast(TIMESTAMP)


TEMPORAL_ARITH: dict[tuple[str, str, str], Callable[[Value, Value, exp.Expr], Value]] = {
    ("time", "+", "interval"): _time_plus_interval,
    ("interval", "+", "time"): lambda a, b, node: _time_plus_interval(b, a, node),
    ("time", "-", "interval"): lambda a, b, node: _time_plus_interval(a, b, node, -1),
    ("time", "-", "time"): _time_minus_time,
    ("date", "+", "time"): _date_plus_time,
    ("time", "+", "date"): lambda a, b, node: _date_plus_time(b, a, node),
    ("date", "+", "int"): _date_plus_int,
    ("int", "+", "date"): lambda a, b, node: _date_plus_int(b, a, node),
    ("date", "-", "int"): lambda a, b, node: _date_plus_int(a, b, node, -1),
    ("date", "-", "date"): _date_minus_date,
    ("date", "-", "timestamp"): _timestamp_minus_timestamp,
    ("timestamp", "-", "date"): _timestamp_minus_timestamp,
    ("timestamp", "-", "timestamp"): _timestamp_minus_timestamp,
    ("interval", "+", "interval"): _interval_arith("+"),
    ("interval", "-", "interval"): _interval_arith("-"),
    **{(k, op, n): _interval_arith(op) for k, op, n in
       [("interval", "*", "int"), ("interval", "*", "decimal"), ("interval", "*", "float"),
        ("int", "*", "interval"), ("decimal", "*", "interval"), ("float", "*", "interval"),
        ("interval", "/", "int"), ("interval", "/", "decimal"), ("interval", "/", "float")]},
    **{(k, "+", "interval"): _temporal_plus_interval for k in ("date", "timestamp")},
    **{("interval", "+", k): (lambda a, b, node: _temporal_plus_interval(b, a, node))
       for k in ("date", "timestamp")},
    **{(k, "-", "interval"): (lambda a, b, node: _temporal_plus_interval(a, b, node, -1))
       for k in ("date", "timestamp")},
}


def _temporal_arg(v: Value, node: exp.Expr, what: str) -> Value:
    """A date / timestamp / interval argument; an unknown literal is read as a timestamp."""
    if is_unknown_literal(node):
        return cast(v, TIMESTAMP, node)
    if kind_of(v.type) not in ("date", "timestamp", "interval", "null") and not (
            what == "extract" and kind_of(v.type) == "time"):
        no_function(what, [node], EvalContext(pa.table({})), node_position(node))
    return v


def _scaled(micros: Value, scale: int) -> Value:
    """An integer count of 10**-scale units (int64) as numeric(19, scale), zero copy."""
    return view_as(micros.cast(pa.decimal128(19, 0)), pa.decimal128(19, scale))


def _interval_field(v: Value, unit: str, node: exp.Expr) -> Value:
    """EXTRACT from an interval (PostgreSQL 15's interval_part, numeric): a year is 365.25
    days and a month 30 for the epoch; seconds carry 6 decimals, milliseconds 3."""
    n, scalar = intervals.rows(v)
    f = intervals.columns(v, n)
    m, d, us = f.months, f.days, f.us
    years = np.trunc(m / 12).astype(np.int64)
    mons = m - 12 * years
    fields = {
        "year": lambda: years, "month": lambda: mons, "day": lambda: d,
        "quarter": lambda: np.trunc(mons / 3) + 1, "decade": lambda: np.trunc(years / 10),
        "century": lambda: np.trunc(years / 100), "millennium": lambda: np.trunc(years / 1000),
        "hour": lambda: np.trunc(us / 3_600_000_000).astype(np.int64),
        "microsecond": lambda: np.fmod(us, 60_000_000),
    }
    scaled = {"second": (lambda: np.fmod(us, 60_000_000), 6),
              "millisecond": (lambda: np.fmod(us, 60_000_000), 3),
              "epoch": (lambda: us + 1_000_000 * (31_557_600 * years + 2_592_000 * mons
                                                  + 86_400 * d), 6)}
    if unit == "minute":
        vals = np.fmod(np.trunc(us / 60_000_000).astype(np.int64), 60)
    elif unit in fields:
        vals = np.asarray(fields[unit]()).astype(np.int64)
    elif unit in scaled:
        vals = np.asarray(scaled[unit][0]()).astype(np.int64)
    else:
        raise error_at(f'unit "{unit}" not supported for type interval', "0A000", node)
    arr = pa.array(vals, pa.int64(), mask=None if f.valid is None else ~f.valid)
    out = _scaled(arr, scaled[unit][1]) if unit in scaled else arr.cast(pa.decimal128(19, 0))
    return out[0] if scalar else out


_EXTRACT = {
    "year": pc.year, "month": pc.month, "day": pc.day, "quarter": pc.quarter,
    "hour": pc.hour, "minute": pc.minute, "week": pc.iso_week, "isoyear": pc.iso_year,
    "doy": pc.day_of_year,
    "dow": lambda v: pc.day_of_week(v, count_from_zero=True, week_start=7),
    "isodow": lambda v: pc.day_of_week(v, count_from_zero=False, week_start=1),
}
_EXTRACT_ALIASES = {"years": "year", "months": "month", "days": "day", "hours": "hour",
                    "minutes": "minute", "seconds": "second", "dayofweek": "dow",
                    "dayofyear": "doy", "weeks": "week", "quarters": "quarter",
                    "milliseconds": "millisecond", "microseconds": "microsecond",
                    "decades": "decade", "centuries": "century", "millennia": "millennium",
                    "mon": "month", "mons": "month", "min": "minute", "mins": "minute",
                    "sec": "second", "secs": "second", "hr": "hour", "hrs": "hour",
                    "ms": "millisecond", "us": "microsecond"}


@handles(exp.Extract)
def _extract(node: exp.Extract, ctx: EvalContext) -> Value:
    """EXTRACT(field FROM source): numeric, as in PostgreSQL 15 (seconds and the epoch
    with 6 decimals, milliseconds with 3, the other fields whole numbers)."""
    unit = node.this.name.lower()
    return _extract_field(_EXTRACT_ALIASES.get(unit, unit), node.expression, node, ctx)


@handles(KuduDatePart)
def _date_part(node: KuduDatePart, ctx: EvalContext) -> Value:
    """date_part('field', source): EXTRACT's value as double precision."""
    field = eval_node(node.this, ctx)
    if not isinstance(field, pa.Scalar) or kind_of(field.type) not in ("string", "null"):
        raise error_at("function date_part(" + pg_name(field.type) + ", ...) does not exist",
                   "42883", node)
    if not field.is_valid:
        return null_of(pa.float64())
    unit = field.as_py().lower()
    return _extract_field(_EXTRACT_ALIASES.get(unit, unit), node.expression, node,
                          ctx).cast(pa.float64())


def _extract_field(unit: str, arg: exp.Expr, node: exp.Expr, ctx: EvalContext) -> Value:
    v = _temporal_arg(eval_node(arg, ctx), arg, "extract")
    k = kind_of(v.type)
    if k == "interval":
        return _interval_field(v, unit, node)
    if k == "null":
        return null_of(pa.decimal128(19, 0))
    if k == "time":     # the fields of a time of day: read off that time on 1970-01-01
        if unit not in ("hour", "minute", "second", "millisecond", "microsecond", "epoch"):
            raise error_at(f'unit "{unit}" not supported for type time without time zone',
                           "0A000", node)
        v, k = v.cast(pa.int64()).cast(TIMESTAMP), "timestamp"
    if k == "timestamp" and v.type.tz:
        if unit == "epoch":
            return _scaled(v.cast(pa.int64()), 6)
        if unit == "timezone":              # the offset east of UTC, in seconds
            local = timezones.to_local(v)
            return pc.divide(pc.subtract(local.cast(pa.int64()), v.cast(pa.int64())),
                             1_000_000).cast(pa.decimal128(19, 0))
        v, k = timezones.to_local(v), "timestamp"   # the fields of the local time
    if unit in _EXTRACT:
        return _EXTRACT[unit](v).cast(pa.decimal128(19, 0))
    if unit == "decade":
        return pc.floor(pc.divide(pc.year(v).cast(pa.float64()), 10)).cast(
            pa.decimal128(19, 0))
    if unit in ("century", "millennium"):
        span = 100 if unit == "century" else 1000
        return pc.add(pc.divide(pc.subtract(pc.year(v), 1), span), 1).cast(
            pa.decimal128(19, 0))
    ts = v.cast(TIMESTAMP) if k == "date" else v
    micros = pc.add(pc.multiply(pc.second(ts).cast(pa.int64()), 1_000_000),
                    pc.add(pc.multiply(pc.millisecond(ts).cast(pa.int64()), 1000),
                           pc.microsecond(ts).cast(pa.int64())))
    if unit == "second":
        return _scaled(micros, 6)
    if unit == "millisecond":
        return _scaled(micros, 3)
    if unit == "microsecond":
        return micros.cast(pa.decimal128(19, 0))
    if unit == "epoch":
        us = ts.cast(TIMESTAMP).cast(pa.int64())
        if k == "date":                     # a date's epoch is whole seconds
            return pc.divide(us, 1_000_000).cast(pa.decimal128(19, 0))
        return _scaled(us, 6)
    raise error_at(f'unit "{unit}" not supported for type {pg_name(v.type)}', "0A000", node)


_TRUNC_UNITS = {"microsecond": ("microsecond", 1), "millisecond": ("millisecond", 1),
                "second": ("second", 1), "minute": ("minute", 1), "hour": ("hour", 1),
                "day": ("day", 1), "week": ("week", 1), "month": ("month", 1),
                "quarter": ("quarter", 1), "year": ("year", 1), "decade": ("year", 10)}


@handles(exp.TimestampTrunc, exp.DateTrunc)
def _date_trunc(node: exp.Expr, ctx: EvalContext) -> Value:
    unit = UNIT_ALIASES.get(node.args["unit"].name.lower())
    v = _temporal_arg(eval_node(node.this, ctx), node.this, "date_trunc")
    if unit not in _TRUNC_UNITS:
        raise error_at(f'unit "{node.args["unit"].name.lower()}" not recognized', "22023", node)
    if kind_of(v.type) == "null":
        return null_of(TIMESTAMP)
    arrow_unit, multiple = _TRUNC_UNITS[unit]
    zone_node = node.args.get("zone")
    zoned = kind_of(v.type) == "timestamp" and v.type.tz
    if zone_node is not None and not zoned:
        # date_trunc(text, timestamptz, text) only: a timestamp or date is read as a
        # timestamptz in the session's zone first, as PostgreSQL's implicit cast does
        v, zoned = cast(v, timezones.TIMESTAMPTZ, node.this), True
    if zoned:
        # in the session's zone (or the one given, date_trunc(unit, tstz, zone)): the local
        # time truncated; from a day up read back in that zone, below a day with the
        # offset the value had (PostgreSQL's timestamptz_trunc re-reads the zone only from
        # DTK_DAY up: 01:30-04 on a fall-back night truncates to 01:00-04, not 01:00-05)
        zone = None if zone_node is None else _constant_zone(zone_node, ctx)
        local = timezones.to_local(v, zone)
        floor = pc.floor_temporal(local, multiple=multiple, unit=arrow_unit,
                                  week_starts_monday=True)
        if unit in _SUB_DAY:
            cut = pc.subtract(local.cast(pa.int64()), floor.cast(pa.int64()))
            instants = v.cast(timezones.TIMESTAMPTZ).cast(pa.int64())
            return pc.subtract(instants, cut).cast(timezones.TIMESTAMPTZ)
        return timezones.to_utc(floor, zone)
    return pc.floor_temporal(v, multiple=multiple, unit=arrow_unit, week_starts_monday=True)


_SUB_DAY = ("microsecond", "millisecond", "second", "minute", "hour")


def _constant_zone(zone_node: exp.Expr, ctx: EvalContext) -> str:
    """A zone argument (constant text) as the Arrow zone name; 0A000 when not constant,
    22023 for a name PostgreSQL would not recognise."""
    z = eval_node(zone_node, ctx)
    if not isinstance(z, pa.Scalar) or kind_of(z.type) not in ("string", "null"):
        raise FeatureNotSupported("the time zone argument must be a constant text",
                                  position=node_position(zone_node))
    try:
        return timezones.arrow_zone(z.as_py() or "")
    except SqlError as e:
        raise error_at(e.message, e.sqlstate, zone_node) from None


# The statement's time, which now(), current_timestamp, current_date, localtimestamp,
# transaction_timestamp() and statement_timestamp() all read, so that they agree within a
# statement (PostgreSQL gives the transaction's start; kudusql applies every statement on
# its own, so it is the statement's start). The session sets it around each statement
# (`statement_clock`); where it is unset (a streamed result read on another thread after
# the statement started) they read the clock. clock_timestamp() always reads the clock.
_STATEMENT_TIME: contextvars.ContextVar[datetime.datetime | None] = contextvars.ContextVar(
    "kudusql_statement_time", default=None)


@contextlib.contextmanager
def statement_clock():
    """Fix the statement's time for the block (nested blocks keep the outer one's)."""
    if _STATEMENT_TIME.get() is not None:
        yield
        return
    token = _STATEMENT_TIME.set(_clock())
    try:
        yield
    finally:
        _STATEMENT_TIME.reset(token)


def _clock() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def _now() -> datetime.datetime:
    t = _STATEMENT_TIME.get()
    return _clock() if t is None else t


def _local_now() -> datetime.datetime:
    """The statement's time as a local time in the session's zone."""
    return timezones.to_local(pa.scalar(_now(), timezones.TIMESTAMPTZ)).as_py()


@handles(exp.CurrentDate)
def _current_date(node: exp.Expr, ctx: EvalContext) -> Value:
    return pa.scalar(_local_now().date(), pa.date32())


@handles(exp.CurrentTimestamp, KuduNow, exp.CurrentDatetime)
def _current_timestamp(node: exp.Expr, ctx: EvalContext) -> Value:
    """now(), current_timestamp: an instant (timestamptz), as in PostgreSQL."""
    return pa.scalar(_now(), timezones.TIMESTAMPTZ)


@handles(exp.Localtimestamp)
def _local_timestamp(node: exp.Expr, ctx: EvalContext) -> Value:
    return pa.scalar(_local_now(), TIMESTAMP)


@handles(exp.CurrentTime, exp.Localtime)
def _current_time(node: exp.Expr, ctx: EvalContext) -> Value:
    return pa.scalar(_local_now().time(), pa.time64("us"))


ANONYMOUS.update({
    "transaction_timestamp": lambda node, ctx: _current_timestamp(node, ctx),
    "statement_timestamp": lambda node, ctx: _current_timestamp(node, ctx),
    "clock_timestamp": lambda node, ctx: pa.scalar(_clock(), timezones.TIMESTAMPTZ),
})


def _make_date(node: exp.Anonymous, ctx: EvalContext) -> Value:
    """make_date(year, month, day): year 0 is 22008 and negative years are BC, as in
    PostgreSQL; a month or day the calendar lacks, or a year outside 4713 BC to 5874897
    (PostgreSQL's dates), is 22008 naming the date."""
    if len(node.expressions) != 3:
        raise error_at("function make_date does not exist", "42883", node)
    parts = [eval_node(e, ctx) for e in node.expressions]
    for p in parts:
        if kind_of(p.type) not in ("int", "null"):
            raise error_at("function make_date(" + ", ".join(pg_name(q.type) for q in parts)
                       + ") does not exist", "42883", node)
    if any(kind_of(p.type) == "null" or (isinstance(p, pa.Scalar) and not p.is_valid)
           for p in parts):
        return null_of(pa.date32())
    scalar = all(isinstance(p, pa.Scalar) for p in parts)
    n = 1 if scalar else max(len(p) for p in parts if not isinstance(p, pa.Scalar))
    ok = np.ones(n, dtype=bool)
    cols = []
    for p in parts:
        if isinstance(p, pa.Scalar):
            cols.append(np.full(n, p.as_py(), np.int64))
        else:
            ok &= p.is_valid().to_numpy(zero_copy_only=False)
            cols.append(pc.fill_null(p.cast(pa.int64()), 1).to_numpy())
    y, m, d = cols
    astro = np.where(y < 0, y + 1, y)           # 1 BC is year 0 of the proleptic calendar
    length = _month_length(astro, np.clip(m, 1, 12))
    bad = ok & ((y == 0) | (y < -4713) | (y > 5874897) | (m < 1) | (m > 12) | (d < 1) |
                (d > length))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise error_at(f"date field value out of range: {y[i]}-{m[i]:02d}-{d[i]:02d}", "22008",
                   node)
    days = _days_from_civil(astro, np.where(ok, m, 1), np.where(ok, d, 1)).astype(np.int64)
    out = pa.array(days.astype(np.int32), pa.date32(), mask=~ok)
    return out[0] if scalar else out


ANONYMOUS["make_date"] = _make_date


def _age(node: exp.Anonymous, ctx: EvalContext) -> Value:
    """age(a, b) and age(a) (= age(current_date, a)): a - b as years, months and days, the
    way PostgreSQL's timestamp_age subtracts field by field and borrows (a day borrowed
    from the month of the earlier timestamp), as an interval; vectorised over numpy."""
    args = [eval_node(e, ctx) for e in node.expressions]
    if len(args) == 1:
        args = [pa.scalar(datetime.datetime.combine(_local_now().date(), datetime.time()),
                          TIMESTAMP),
                args[0]]
    if len(args) != 2 or any(kind_of(v.type) not in ("date", "timestamp", "null") for v in args):
        raise error_at("function age(" + ", ".join(pg_name(v.type) for v in args)
                   + ") does not exist", "42883", node)
    if any(kind_of(v.type) == "null" for v in args):
        return null_of(INTERVAL)
    scalar = all(isinstance(v, pa.Scalar) for v in args)
    n = 1 if scalar else max(len(v) for v in args if not isinstance(v, pa.Scalar))
    cols = []
    valid = np.ones(n, dtype=bool)
    for v in args:
        a = pa.repeat(v, n) if isinstance(v, pa.Scalar) else v
        if isinstance(a, pa.ChunkedArray):
            a = a.combine_chunks()
        a = a.cast(TIMESTAMP) if kind_of(a.type) == "date" else a
        valid &= a.is_valid().to_numpy(zero_copy_only=False)
        a = pc.fill_null(a, pa.scalar(0, TIMESTAMP))
        cols.append({f: getattr(pc, f)(a).to_numpy().astype(np.int64)
                     for f in ("year", "month", "day", "hour", "minute", "second")}
                    | {"us": pc.add(pc.multiply(pc.millisecond(a), 1000),
                                    pc.microsecond(a)).to_numpy().astype(np.int64),
                       "t": a.cast(pa.int64()).to_numpy()})
    t1, t2 = cols
    flip = t1["t"] < t2["t"]
    sign = np.where(flip, -1, 1)
    d = {f: sign * (t1[f] - t2[f]) for f in ("year", "month", "day", "hour", "minute",
                                             "second", "us")}
    for low, high, size in (("us", "second", 1_000_000), ("second", "minute", 60),
                            ("minute", "hour", 60), ("hour", "day", 24)):
        borrow = d[low] < 0
        d[low] = np.where(borrow, d[low] + size, d[low])
        d[high] = np.where(borrow, d[high] - 1, d[high])
    # days borrow from the month of the earlier timestamp (tm1 when flipped, else tm2)
    ey = np.where(flip, t1["year"], t2["year"])
    em = np.where(flip, t1["month"], t2["month"])
    length = _month_length(ey, em).astype(np.int64)
    for _ in range(2):                       # at most twice: a day difference is > -31
        borrow = d["day"] < 0
        d["day"] = np.where(borrow, d["day"] + length, d["day"])
        d["month"] = np.where(borrow, d["month"] - 1, d["month"])
    borrow = d["month"] < 0
    d["month"] = np.where(borrow, d["month"] + 12, d["month"])
    d["year"] = np.where(borrow, d["year"] - 1, d["year"])
    months = sign * (d["year"] * 12 + d["month"])
    days = sign * d["day"]
    nanos = sign * ((((d["hour"] * 60) + d["minute"]) * 60 + d["second"]) * 1_000_000
                    + d["us"]) * 1000
    out = _interval_array(months, days, nanos, None if valid.all() else valid)
    return out[0] if scalar else out


ANONYMOUS["age"] = _age


def _interval_value(v: Value, node: exp.Expr, what: str) -> Value:
    """An interval argument (an unknown literal read as one); 42883 for any other type."""
    if is_unknown_literal(node):
        return cast(v, INTERVAL, node)
    if kind_of(v.type) == "null":
        return v.cast(INTERVAL) if isinstance(v, pa.Scalar) else pa.nulls(len(v), INTERVAL)
    if kind_of(v.type) != "interval":
        raise error_at(f"function {what}({pg_name(v.type)}) does not exist", "42883", node)
    return v


def _justify(fn: Callable[[intervals.Fields], intervals.Fields], what: str):
    def handler(node: exp.Expr, ctx: EvalContext) -> Value:
        v = _interval_value(eval_node(node.this, ctx), node.this, what)
        n, scalar = intervals.rows(v)
        try:
            return intervals.build(fn(intervals.columns(v, n)), scalar)
        except SqlError as e:
            raise error_at(e.message, e.sqlstate, node) from None
    return handler


handles(exp.JustifyHours)(_justify(intervals.justify_hours, "justify_hours"))
handles(exp.JustifyDays)(_justify(intervals.justify_days, "justify_days"))
handles(exp.JustifyInterval)(_justify(intervals.justify_interval, "justify_interval"))

# make_interval(years, months, weeks, days, hours, mins, secs): the first six integers,
# secs double precision; each defaults to 0 and may be named (`hours => 2`)
_MAKE_INTERVAL_ARGS = ("year", "month", "week", "day", "hour", "minute", "second")
_MAKE_INTERVAL_NAMES = ("years", "months", "weeks", "days", "hours", "mins", "secs")


@handles(exp.MakeInterval)
def _make_interval(node: exp.MakeInterval, ctx: EvalContext) -> Value:
    given: dict[str, tuple[Value, exp.Expr]] = {}
    for key in _MAKE_INTERVAL_ARGS:
        arg = node.args.get(key)
        if arg is None:
            continue
        if isinstance(arg, exp.Kwarg):
            name = arg.this.name.lower()
            if name not in _MAKE_INTERVAL_NAMES:
                raise error_at(f"function make_interval({name} => {arg.expression.sql()}) "
                           "does not exist", "42883", node)
            key, arg = _MAKE_INTERVAL_ARGS[_MAKE_INTERVAL_NAMES.index(name)], arg.expression
        v = eval_node(arg, ctx)
        if is_unknown_literal(arg):
            v = cast(v, pa.float64() if key == "second" else pa.int32(), arg)
        if kind_of(v.type) not in (("int", "null") if key != "second" else
                                 ("int", "float", "decimal", "null")):
            raise error_at(f"function make_interval({pg_name(v.type)}) does not exist",
                       "42883", arg)
        given[key] = (v, arg)
    n, scalar = intervals.rows(*(v for v, _ in given.values()))
    cols: dict[str, np.ndarray] = {}
    valid = None
    for key in _MAKE_INTERVAL_ARGS:
        if key not in given:
            cols[key] = np.zeros(n, np.float64 if key == "second" else np.int64)
            continue
        v, _ = given[key]
        if key == "second":
            vals, ok = intervals.numbers(v, n)
        else:
            vals, ok = intervals.int64s(v, n)
        cols[key] = vals
        valid = intervals.and_valid(valid, ok)
    with np.errstate(all="ignore"):
        us = np.rint(cols["second"] * 1e6)
        if n and not (np.all(np.isfinite(us)) and np.abs(us).max() < 2**62):
            raise error_at("interval out of range", "22008", node)
        time = (cols["hour"] * 3600 + cols["minute"] * 60) * 1_000_000 + us.astype(np.int64)
    fields = intervals.Fields(cols["year"] * 12 + cols["month"],
                              cols["week"] * 7 + cols["day"], time, valid)
    try:
        return intervals.build(fields, scalar)
    except SqlError as e:
        raise error_at(e.message, e.sqlstate, node) from None


@handles(exp.DateBin)
def _date_bin(node: exp.DateBin, ctx: EvalContext) -> Value:
    """date_bin(stride, source, origin): the start of the stride-long bin, counted from
    origin, that holds source. The stride has no months (0A000 as in PostgreSQL), is
    positive (22008, as PostgreSQL words it); a source before the origin falls in the bin
    below it."""
    origin_node = node.args.get("origin") or node.args.get("unit")
    if origin_node is None:
        raise error_at("function date_bin(interval, timestamp without time zone) does not exist",
                   "42883", node)
    if isinstance(origin_node, exp.Var):     # sqlglot reads a bare '...' origin as a unit
        origin_node = exp.Literal.string(origin_node.name)
    stride = _interval_value(eval_node(node.this, ctx), node.this, "date_bin")
    src = _temporal_arg(eval_node(node.expression, ctx), node.expression, "date_bin")
    origin = _temporal_arg(eval_node(origin_node, ctx), origin_node, "date_bin")
    for v in (src, origin):
        if kind_of(v.type) == "interval":
            raise error_at("function date_bin(interval, interval, timestamp without time zone) "
                       "does not exist", "42883", node)
    zoned = kind_of(src.type) == "timestamp" and src.type.tz
    n, scalar = intervals.rows(stride, src, origin)
    f = intervals.columns(stride, n)
    live = np.ones(n, bool) if f.valid is None else f.valid
    if np.any((f.months != 0) & live):
        raise error_at("timestamps cannot be binned into intervals containing months or years",
                   "0A000", node)
    step = f.days * US_PER_DAY + f.us
    if np.any((step <= 0) & live):
        raise error_at("stride must be greater than zero", "22008", node)
    if kind_of(src.type) == "timestamp" and src.type.tz:
        # on instants (PostgreSQL's timestamptz_bin); a timestamp origin is local time
        if kind_of(origin.type) != "null":
            origin = cast(origin, timezones.TIMESTAMPTZ, origin_node)
        src, origin = src.cast(pa.int64()), (origin.cast(pa.int64())
                                             if kind_of(origin.type) != "null" else origin)
    elif kind_of(origin.type) == "timestamp" and origin.type.tz:
        origin = cast(origin, TIMESTAMP, origin_node)
    s, s_ok = intervals.int64s(src.cast(TIMESTAMP) if kind_of(src.type) not in ("null", "int")
                               else src, n)
    o, o_ok = intervals.int64s(origin.cast(TIMESTAMP) if kind_of(origin.type) not in ("null", "int")
                               else origin, n)
    valid = intervals.and_valid(f.valid, s_ok, o_ok)
    step = np.where(live, step, 1)
    out = o + np.floor_divide(s - o, step) * step
    arr = pa.array(out, timezones.TIMESTAMPTZ if zoned else TIMESTAMP,
                   mask=None if valid is None else ~valid)
    return arr[0] if scalar else arr


@handles(exp.AtTimeZone)
def _at_time_zone(node: exp.AtTimeZone, ctx: EvalContext) -> Value:
    """`t AT TIME ZONE zone`: a timestamptz's local time in `zone` (a timestamp), or a
    timestamp read as local time in `zone` (a timestamptz); an unknown literal is a
    timestamptz, as PostgreSQL resolves it. The zone is constant text or an interval
    offset (east of UTC)."""
    v = eval_node(node.this, ctx)
    if is_unknown_literal(node.this):
        v = cast(v, timezones.TIMESTAMPTZ, node.this)
    zone_node = node.args["zone"]
    z = eval_node(zone_node, ctx)
    k = kind_of(v.type)
    if k == "date":
        v, k = cast(v, timezones.TIMESTAMPTZ, node.this), "timestamp"
    if k not in ("timestamp", "null"):
        raise error_at(f"function timezone({pg_name(z.type)}, {pg_name(v.type)}) does not "
                   "exist", "42883", node)
    if not isinstance(z, pa.Scalar):
        raise FeatureNotSupported("AT TIME ZONE needs a constant zone",
                                  position=node_position(zone_node))
    zoned = k == "timestamp" and v.type.tz
    if not z.is_valid or k == "null":
        return null_of(TIMESTAMP if zoned or k == "null" else timezones.TIMESTAMPTZ)
    if kind_of(z.type) == "interval":
        m, d, us = interval_parts(z)
        if m or d:
            raise error_at('interval time zone "' + str(z.as_py()) + '" must not include '
                       "months or days", "22023", zone_node)
        sign = "-" if us < 0 else "+"
        zone = f"{sign}{abs(us) // 3_600_000_000:02d}:{abs(us) // 60_000_000 % 60:02d}"
    elif kind_of(z.type) == "string":
        try:
            zone = timezones.arrow_zone(z.as_py())
        except SqlError as e:
            raise error_at(e.message, e.sqlstate, zone_node) from None
    else:
        raise error_at(f"function timezone({pg_name(z.type)}, {pg_name(v.type)}) does not "
                   "exist", "42883", node)
    if zoned:
        return timezones.to_local(v, zone)
    return timezones.to_utc(v.cast(TIMESTAMP) if v.type.unit != "us" else v, zone)
