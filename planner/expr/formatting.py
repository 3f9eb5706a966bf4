"""PostgreSQL's data type formatting functions for dates and timestamps:
`to_char(date | timestamp, format)`, `to_date(text, format)` and
`to_timestamp(text, format)`.

The format must be a constant. It is read once into a list of fields (PostgreSQL's
template patterns: YYYY, MM, Mon, Month, DD, Day, HH24, MI, SS, AM, Q, ...; the FM prefix
that drops padding; "quoted" literal text) and each field becomes one Arrow string column,
joined per row: vectorised, no Python loop over rows. Numeric patterns are read in any
case ('yyyy-mm-dd'); PostgreSQL patterns not implemented here (SSSSS, TH, TM, RM, W, ...)
are 0A000 rather than copied as text. to_date / to_timestamp translate the numeric
patterns and month names to `strptime` directives; a text that does not match is 22007, a
day the month lacks 22008. Number formatting (`to_char(numeric, '999.99')`) is not
implemented (42883).
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.errors import SqlError
from planner.expr.arrow_values import any_true, Value
from planner.expr.located import error_at
from planner.expr.sqltypes import kind_of, null_of, pg_name, TIMESTAMP
from planner.expr.core import ANONYMOUS, EvalContext, eval_node, handles
from planner.expr.coerce import const_arg, string_arg

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]

# patterns, longest first so that the scan takes the longest match (HH24 before HH); the
# numeric ones in any case, as PostgreSQL reads them ('yyyy-mm-dd')
NUMERIC_KINDS = ["HH24", "HH12", "YYYY", "IYYY", "DDD", "YYY", "HH", "MI", "SS", "MS", "US", "YY",
            "MM", "DD", "ID", "IW", "WW", "CC", "Y", "D", "Q", "J"]
_NAMED = ["MONTH", "Month", "month", "A.M.", "P.M.", "a.m.", "p.m.", "DAY", "Day", "day",
          "MON", "Mon", "mon", "AM", "PM", "am", "pm", "DY", "Dy", "dy"]
# PostgreSQL patterns and modifiers not implemented here: refused rather than copied as text
_UNSUPPORTED = ["SSSSS", "SSSS", "Y,YYY", "IDDD", "IYY", "IY", "TZH", "TZM", "FF1", "FF2",
                "FF3", "FF4", "FF5", "FF6", "B.C.", "A.D.", "b.c.", "a.d.", "BC", "AD", "bc",
                "ad", "RM", "rm", "TZ", "tz", "OF", "TH", "th", "TM", "FX", "SP", "W", "I"]
_TOKEN = re.compile("|".join(
    [re.escape(p) for p in sorted(_UNSUPPORTED + _NAMED, key=len, reverse=True)
     if len(p) > 3] + ["(?i:" + re.escape(p) + ")" for p in NUMERIC_KINDS if len(p) == 4] +
    [re.escape(p) for p in _NAMED + _UNSUPPORTED if len(p) == 3] +
    ["(?i:" + re.escape(p) + ")" for p in NUMERIC_KINDS if len(p) == 3] +
    [re.escape(p) for p in _NAMED + _UNSUPPORTED if len(p) == 2] +
    ["(?i:" + re.escape(p) + ")" for p in NUMERIC_KINDS if len(p) == 2] +
    [re.escape(p) for p in _UNSUPPORTED if len(p) == 1] +
    ["(?i:" + re.escape(p) + ")" for p in NUMERIC_KINDS if len(p) == 1]))


def _parse_format(fmt: str) -> list[tuple[str, str | bool]]:
    """The format as [(kind, value)]: ("text", literal) or ("field", pattern) with FM in
    a separate ("fm", True) marker before the field it applies to."""
    out: list[tuple[str, str | bool]] = []
    i = 0
    while i < len(fmt):
        if fmt[i] == '"':                           # "literal text"; \" inside
            j, lit = i + 1, []
            while j < len(fmt) and fmt[j] != '"':
                if fmt[j] == "\\" and j + 1 < len(fmt):
                    j += 1
                lit.append(fmt[j])
                j += 1
            out.append(("text", "".join(lit)))
            i = j + 1
            continue
        if fmt.startswith('\\"', i):                  # \" is a double quote; any other
            out.append(("text", '"'))                   # backslash is itself
            i += 2
            continue
        if fmt.startswith(("FM", "fm"), i):
            out.append(("fm", True))
            i += 2
            continue
        m = _TOKEN.match(fmt, i)
        if m:
            word = m.group(0)
            if word in _UNSUPPORTED:
                raise SqlError(f'formatting pattern "{word}" is not supported', "0A000")
            upper = word.upper()
            out.append(("field", upper if upper in NUMERIC_KINDS else word))
            i = m.end()
        else:
            out.append(("text", fmt[i]))
            i += 1
    return out


def _num(v: pa.Array, width: int, fm: bool) -> pa.Array:
    """Integers as text, zero-padded to `width` (not with FM); negatives keep their sign."""
    text = pc.cast(v, pa.string())
    if fm or width <= 1:
        return text
    neg = pc.less(v, 0)
    padded = pc.utf8_lpad(pc.cast(pc.abs(v), pa.string()), width=width, padding="0")
    return pc.if_else(neg, pc.binary_join_element_wise("-", padded, ""), padded)


def _name(names: list[str], index: pa.Array, style: str, width: int, fm: bool) -> pa.Array:
    """A month / day name by 0-based index, in the pattern's case (MONTH, Month, month),
    padded with blanks to `width` unless FM."""
    if style.isupper():
        names = [n.upper() for n in names]
    elif style.islower():
        names = [n.lower() for n in names]
    text = pc.take(pa.array(names), index)
    return text if fm or width == 0 else pc.utf8_rpad(text, width=width, padding=" ")


def _field(p: str, ts: pa.Array, fm: bool) -> pa.Array:
    """One pattern of a timestamp column (microseconds, no time zone) as text."""
    year = pc.year(ts)
    if p in ("YYYY", "IYYY"):
        y = year if p == "YYYY" else pc.iso_year(ts)
        # PostgreSQL writes years before 1 AD as BC years: year 0 is 1 BC
        return _num(pc.if_else(pc.greater(y, 0), y, pc.subtract(1, y)), 4, fm)
    if p in ("YYY", "YY", "Y"):                  # the last digits of the year
        return _num(_mod(pc.abs(year), 10 ** len(p)), len(p), fm)
    if p == "CC":
        return _num(pc.add(pc.divide(pc.subtract(pc.cast(year, pa.int64()), 1), 100), 1), 2,
                    fm)
    if p == "Q":
        return pc.cast(pc.quarter(ts), pa.string())
    if p == "MM":
        return _num(pc.month(ts), 2, fm)
    if p in ("MONTH", "Month", "month"):
        return _name(_MONTHS, pc.subtract(pc.month(ts), 1), p, 9, fm)
    if p in ("MON", "Mon", "mon"):
        return _name([m[:3] for m in _MONTHS], pc.subtract(pc.month(ts), 1), p, 0, fm)
    if p == "DD":
        return _num(pc.day(ts), 2, fm)
    if p == "DDD":
        return _num(pc.day_of_year(ts), 3, fm)
    if p == "D":                                   # 1 = Sunday
        return pc.cast(pc.add(pc.day_of_week(ts, count_from_zero=True, week_start=7), 1),
                       pa.string())
    if p == "ID":                                  # ISO: 1 = Monday
        return pc.cast(pc.day_of_week(ts, count_from_zero=False, week_start=1), pa.string())
    if p in ("DAY", "Day", "day"):
        return _name(_DAYS, pc.day_of_week(ts, count_from_zero=True, week_start=7), p, 9, fm)
    if p in ("DY", "Dy", "dy"):
        return _name([d[:3] for d in _DAYS],
                     pc.day_of_week(ts, count_from_zero=True, week_start=7), p, 0, fm)
    if p == "IW":
        return _num(pc.iso_week(ts), 2, fm)
    if p == "WW":                                  # weeks from January 1st
        return _num(pc.add(pc.divide(pc.subtract(pc.day_of_year(ts), 1), 7), 1), 2, fm)
    if p == "J":                                   # Julian day: 2440588 is 1970-01-01
        micros = pc.cast(ts, pa.int64())
        days = pc.divide(micros, 86_400_000_000)            # toward zero: floor below 0
        days = pc.if_else(pc.and_(pc.less(micros, 0), pc.not_equal(
            pc.multiply(days, 86_400_000_000), micros)), pc.subtract(days, 1), days)
        return pc.cast(pc.add(days, 2440588), pa.string())
    if p == "HH24":
        return _num(pc.hour(ts), 2, fm)
    if p in ("HH", "HH12"):
        h = pc.hour(ts)
        return _num(pc.if_else(pc.equal(_mod(h, 12), 0), 12, _mod(h, 12)), 2, fm)
    if p == "MI":
        return _num(pc.minute(ts), 2, fm)
    if p == "SS":
        return _num(pc.second(ts), 2, fm)
    if p == "MS":
        return _num(pc.millisecond(ts), 3, fm)
    if p == "US":
        return _num(pc.add(pc.multiply(pc.millisecond(ts), 1000), pc.microsecond(ts)), 6, fm)
    # AM / PM markers, in the pattern's spelling
    pm = pc.greater_equal(pc.hour(ts), 12)
    am_text, pm_text = ("AM", "PM") if p in ("AM", "PM") else (
        ("am", "pm") if p in ("am", "pm") else ("A.M.", "P.M.") if p in ("A.M.", "P.M.")
        else ("a.m.", "p.m."))
    return pc.if_else(pm, pa.scalar(pm_text), pa.scalar(am_text))


def _mod(v: pa.Array, m: int) -> pa.Array:
    """v mod m for non-negative integer arrays."""
    v = pc.cast(v, pa.int64())
    return pc.subtract(v, pc.multiply(pc.divide(v, m), m))


def _to_char(node: exp.Anonymous, ctx: EvalContext) -> Value:
    if len(node.expressions) != 2:
        raise error_at("function to_char does not exist", "42883", node)
    v, f = (eval_node(e, ctx) for e in node.expressions)
    if kind_of(v.type) not in ("date", "timestamp", "null") or kind_of(f.type) not in (
            "string", "null"):
        raise error_at(f"function to_char({pg_name(v.type)}, {pg_name(f.type)}) does not "
                   "exist", "42883", node)
    fmt = const_arg(f, "to_char format", node.expressions[1])
    if not fmt or kind_of(v.type) == "null":          # '' too, as in PostgreSQL
        return null_of(pa.string())
    scalar = isinstance(v, pa.Scalar)
    arr = pa.repeat(v, 1) if scalar else v          # (a BC date has no Python value)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    ts = arr.cast(TIMESTAMP) if kind_of(arr.type) == "date" else arr
    if pa.types.is_timestamp(ts.type) and ts.type.tz is not None:
        ts = ts.cast(pa.timestamp(ts.type.unit))
    parts, fm = [], False
    for kind, value in _parse_format(fmt):
        if kind == "fm":
            fm = True
            continue
        if kind == "text":
            parts.append(pa.scalar(value))
        else:
            parts.append(_field(value, ts, fm))
        fm = False
    if not parts:
        out = pc.if_else(pc.is_valid(ts), pa.scalar(""), null_of(pa.string()))
    else:
        out = pc.binary_join_element_wise(*parts, pa.scalar(""))
        out = pc.if_else(pc.is_valid(ts), out, null_of(pa.string()))
    return out[0] if scalar else out


# to_date / to_timestamp: patterns -> strptime directives
_PARSE = {"YYYY": "%Y", "MM": "%m", "DD": "%d", "HH24": "%H", "HH12": "%I", "HH": "%I",
          "MI": "%M", "SS": "%S", "Mon": "%b", "MON": "%b", "mon": "%b", "Month": "%B",
          "MONTH": "%B", "month": "%B", "AM": "%p", "PM": "%p", "YY": "%y", "DDD": "%j"}


def _parse_with(node: exp.Anonymous, ctx: EvalContext, name: str, out: pa.DataType) -> Value:
    if len(node.expressions) != 2:
        raise error_at(f"function {name} does not exist", "42883", node)
    v, f = (string_arg(eval_node(e, ctx), name, e) for e in node.expressions)
    fmt = const_arg(f, f"{name} format", node.expressions[1])
    if fmt is None or kind_of(v.type) == "null":
        return null_of(out)
    directives = []
    for kind, value in _parse_format(fmt):
        if kind == "fm":
            continue
        if kind == "text":
            directives.append(value.replace("%", "%%"))
        elif value in _PARSE:
            directives.append(_PARSE[value])
        else:
            raise error_at(f'formatting field "{value}" is not supported in {name}', "0A000",
                       node)
    strf = "".join(directives)
    text = pc.utf8_trim_whitespace(v)
    parsed = pc.strptime(text, format=strf, unit="us", error_is_null=True)
    bad = pc.and_(pc.is_null(parsed), pc.is_valid(v))
    if "%d" in directives and "%m" in directives:
        # strptime rolls 2024-02-30 over to March 1st; PostgreSQL refuses it (22008): the
        # day and month written must be the date's
        groups = "".join({"%d": r"(?P<d>\d{1,2})", "%m": r"(?P<m>\d{1,2})",
                          "%Y": r"\d{4}"}.get(d, ".*?" if d.startswith("%")
                                              else re.escape(d.replace("%%", "%")))
                         for d in directives)
        fields = pc.extract_regex(text, pattern="^" + groups + "$")
        day = pc.cast(pc.struct_field(fields, "d"), pa.int64())
        month = pc.cast(pc.struct_field(fields, "m"), pa.int64())
        rolled = pc.and_(pc.is_valid(parsed), pc.or_(
            pc.not_equal(pc.day(parsed), day), pc.not_equal(pc.month(parsed), month)))
        rolled = pc.fill_null(rolled, False)
        if any_true(rolled):
            sample = text.as_py() if isinstance(text, pa.Scalar) else \
                pc.filter(text, rolled)[0].as_py()
            raise error_at(f'date/time field value out of range: "{sample}"', "22008", node)
    if any_true(bad):
        sample = v.as_py() if isinstance(v, pa.Scalar) else pc.filter(v, bad)[0].as_py()
        raise error_at(f'invalid value "{sample}" for the format "{fmt}"', "22007", node)
    return parsed.cast(out)


ANONYMOUS["to_char"] = _to_char
ANONYMOUS["to_date"] = lambda node, ctx: _parse_with(node, ctx, "to_date", pa.date32())
ANONYMOUS["to_timestamp"] = lambda node, ctx: _parse_with(node, ctx, "to_timestamp", TIMESTAMP)


@handles(exp.UnixToTime)
def _to_timestamp_epoch(node: exp.UnixToTime, ctx: EvalContext) -> Value:
    """to_timestamp(seconds since 1970-01-01 UTC): the timestamp (UTC, as every engine
    timestamp; PostgreSQL's is a timestamp with time zone), to the microsecond."""
    v = eval_node(node.this, ctx)
    if kind_of(v.type) == "null":
        return null_of(TIMESTAMP)
    if kind_of(v.type) not in ("int", "float", "decimal"):
        raise error_at(f"function to_timestamp({pg_name(v.type)}) does not exist", "42883", node)
    secs = pc.cast(v, pa.float64()) if kind_of(v.type) == "decimal" else v
    if not (pc.is_finite(secs).as_py() if isinstance(secs, pa.Scalar) else
            pc.all(pc.or_(pc.is_finite(secs), pc.is_null(secs))).as_py()):
        raise error_at("timestamp cannot be NaN or infinite here", "22008", node)
    micros = pc.round(pc.multiply(pc.cast(secs, pa.float64()), 1_000_000.0))
    try:
        return pc.cast(pc.cast(micros, pa.int64()), TIMESTAMP)
    except pa.ArrowInvalid:
        raise error_at("timestamp out of range", "22008", node) from None
