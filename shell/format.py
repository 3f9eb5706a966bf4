"""Rendering results and errors as text: pure functions of their arguments, no I/O, no
terminal state (the REPL passes the terminal width in).

    format_result(result, opts)      one Result -> its text, by opts.format / opts.expanded:
        aligned   psql's table, headers centred, numbers right-aligned, multi-line cells
                  continued with `+`, then "(n rows)" and the result's footer lines
        expanded  \\x: one "-[ RECORD n ]" block per row, `column | value`
        csv       RFC 4180 with a header row; NULL is an empty field
        json      a JSON array of objects, one per line; NULL is null
    format_error(message, ...)       "ERROR:  ..." with "LINE n: <line>" and a caret under the
                                     1-based position, DETAIL / HINT lines
    format_row_errors(errors, n)     "ERROR:  2 of 5 rows failed" and one line per failed row
    format_elapsed(seconds)          psql's "Time: 12.345 ms (00:01.235)"

Cells: NULL renders as `opts.null` (`<null>` by default: distinct from the empty string and
from the text 'NULL'); booleans as true/false; timestamps ISO with a space and without
trailing zero fractions; DECIMAL exactly, never in exponent form; REAL with float32's
shortest repr; bytes as `\\x` hex; intervals as PostgreSQL prints them. Widths are display
widths (wcwidth), so CJK text and emoji line up.

Display formatting is per value in Python, column by column: it runs once over rows a human
is about to read; string and integer columns take the vectorised `cast(string)` path.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import decimal
import io
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from wcwidth import wcswidth

from shell.backend import Result, RowError

FORMATS = ("aligned", "csv", "json")
EXPANDED = ("off", "on", "auto")


@dataclasses.dataclass(frozen=True)
class FormatOptions:
    format: str = "aligned"       # aligned | csv | json
    expanded: str = "off"         # off | on | auto (expanded when wider than `width`)
    null: str = "<null>"
    width: int | None = None      # terminal columns, for expanded=auto and error lines


# ---------------------------------------------------------------------------------------------
# cells


def display_width(s: str) -> int:
    w = wcswidth(s)
    return len(s) if w < 0 else w


def _trim_fraction(s: str) -> str:
    """'10:00:00.500000' -> '10:00:00.5'; '10:00:00.000000' -> '10:00:00'."""
    if "." not in s:
        return s
    head, _, frac = s.partition(".")
    tz = ""
    for sep in ("+", "-"):
        if sep in frac:
            frac, _, rest = frac.partition(sep)
            tz = sep + rest
    frac = frac.rstrip("0")
    return head + ("." + frac if frac else "") + tz


def _interval_text(months: int, days: int, micros: int) -> str:
    """PostgreSQL's interval output: '1 year 2 mons 3 days 04:05:06.5'."""
    parts = []
    years, mons = divmod(abs(months), 12)
    sign = "-" if months < 0 else ""
    if years:
        parts.append(f"{sign}{years} year{'s' if years != 1 else ''}")
    if mons:
        parts.append(f"{sign}{mons} mon{'s' if mons != 1 else ''}")
    if days:
        parts.append(f"{days} day{'s' if abs(days) != 1 else ''}")
    if micros or not parts:
        neg = micros < 0
        secs, us = divmod(abs(micros), 1_000_000)
        h, rem = divmod(secs, 3600)
        m, s = divmod(rem, 60)
        t = f"{'-' if neg else ''}{h:02d}:{m:02d}:{s:02d}"
        if us:
            t += f".{us:06d}".rstrip("0")
        parts.append(t)
    return " ".join(parts)


def _json_value(v) -> str:
    """JSON text of a Python value from Arrow (DECIMAL stays an exact JSON number)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return json.dumps(v) if math.isfinite(v) else json.dumps(_float_text(v))
    if isinstance(v, decimal.Decimal):
        return format(v, "f") if v.is_finite() else json.dumps(str(v))
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)}: {_json_value(x)}"
                               for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return "[" + ", ".join(_json_value(x) for x in v) + "]"
    return json.dumps(_scalar_text(v), ensure_ascii=False)


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def _scalar_text(v) -> str:
    """Text of one non-null Python value produced by `to_pylist()`."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, decimal.Decimal):
        return format(v, "f") if v.is_finite() else str(v)
    if isinstance(v, datetime.datetime):
        s = _trim_fraction(v.isoformat(sep=" "))
        return s[:-3] if s.endswith(("+00:00", "-00:00")) else s
    if isinstance(v, (datetime.date, datetime.time)):
        return _trim_fraction(v.isoformat())
    if isinstance(v, datetime.timedelta):
        return _interval_text(0, v.days, v.seconds * 1_000_000 + v.microseconds)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, pa.MonthDayNano):
        return _interval_text(v.months, v.days, v.nanoseconds // 1000)
    if isinstance(v, (dict, list, tuple)):
        return _json_value(v)
    return str(v)


def column_text(col: pa.ChunkedArray | pa.Array) -> list[str | None]:
    """Each cell of one column as text (None for NULL)."""
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t):
        return pc.cast(col, pa.string()).to_pylist()
    if pa.types.is_null(t):
        return [None] * len(col)
    if pa.types.is_float32(t):
        return [None if v is None else str(np.float32(v)) if math.isfinite(v)
                else _float_text(v) for v in col.to_pylist()]
    if pa.types.is_dictionary(t):
        return column_text(pc.cast(col, t.value_type))
    if pa.types.is_timestamp(t) and t.unit == "ns":
        col = pc.cast(col, pa.timestamp("us", t.tz), safe=False)
    try:
        return [None if v is None else _scalar_text(v) for v in col.to_pylist()]
    except (ValueError, OverflowError, pa.ArrowException):   # e.g. a date beyond year 9999
        return pc.cast(col, pa.string()).to_pylist()


def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


# ---------------------------------------------------------------------------------------------
# tables


def _rows_footer(n: int) -> str:
    return f"({n} row{'' if n == 1 else 's'})"


def _cells(result: Result, null: str) -> tuple[list[str], list[list[str]], list[bool]]:
    table = result.table
    names = list(table.column_names)
    cols = [[null if v is None else v for v in column_text(c)] for c in table.columns]
    right = [_is_numeric(f.type) for f in table.schema]
    return names, cols, right


def aligned(result: Result, null: str = "<null>") -> str:
    """psql's aligned format (see the module docstring)."""
    names, cols, right = _cells(result, null)
    nrows = result.table.num_rows
    split = [[v.split("\n") for v in c] for c in cols]
    widths = []
    for name, c in zip(names, split):
        w = display_width(name)
        for lines in c:
            for ln in lines:
                w = max(w, display_width(ln))
        widths.append(w)
    out: list[str] = []
    total = sum(w + 3 for w in widths) - 1 if widths else 0
    if result.title:
        pad = max(0, (total - display_width(result.title)) // 2)
        out.append(" " * pad + result.title)

    def pad_to(s: str, w: int, how: str) -> str:
        gap = w - display_width(s)
        if how == "right":
            return " " * gap + s
        if how == "center":
            return " " * (gap // 2) + s + " " * (gap - gap // 2)
        return s + " " * gap

    if names:
        out.append(" " + " | ".join(pad_to(n, w, "center") for n, w in zip(names, widths))
                   .rstrip())
        out.append("+".join("-" * (w + 2) for w in widths))
    else:
        out.append("--")
    for r in range(nrows):
        height = max((len(c[r]) for c in split), default=1)
        for k in range(height):
            parts = []
            for ci, (c, w) in enumerate(zip(split, widths)):
                lines = c[r]
                text = lines[k] if k < len(lines) else ""
                marker = "+" if k < len(lines) - 1 else " "
                cell = pad_to(text, w, "right" if right[ci] and len(lines) == 1 else "left")
                parts.append(" " + cell + marker)
            out.append("|".join(parts).rstrip())
    if result.row_count:
        out.append(_rows_footer(nrows))
    out.extend(result.footer)
    return "\n".join(out)


def expanded(result: Result, null: str = "<null>") -> str:
    """psql's expanded format (\\x): one block per row."""
    names, cols, _right = _cells(result, null)
    nrows = result.table.num_rows
    out: list[str] = []
    if result.title:
        out.append(result.title)
    if nrows == 0:
        out.append(_rows_footer(0))
        out.extend(result.footer)
        return "\n".join(out)
    kw = max((display_width(n) for n in names), default=0)
    for r in range(nrows):
        values = [c[r].split("\n") for c in cols]
        vw = max((display_width(ln) for v in values for ln in v), default=0)
        head = f"-[ RECORD {r + 1} ]"
        target = "-" * (kw + 1) + "+" + "-" * (vw + 1)
        out.append(head + target[len(head):] if len(head) < len(target) else head)
        for name, lines in zip(names, values):
            for k, ln in enumerate(lines):
                key = name if k == 0 else ""
                marker = "+" if k < len(lines) - 1 else ""
                out.append((key + " " * (kw - display_width(key)) + " | " + ln + marker)
                           .rstrip())
    out.extend(result.footer)
    return "\n".join(out)


def csv_text(result: Result) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(result.table.column_names)
    cols = [column_text(c) for c in result.table.columns]
    for row in zip(*cols):
        w.writerow(["" if v is None else v for v in row])
    return buf.getvalue().rstrip("\n")


def _json_column(col) -> list:
    t = col.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        col = pc.cast(col, pa.timestamp("us", t.tz), safe=False)
    values = col.to_pylist()
    if pa.types.is_float32(t):     # 0.1f is 0.1, not 0.10000000149011612
        values = [v if v is None or not math.isfinite(v) else float(str(np.float32(v)))
                  for v in values]
    return values


def json_text(result: Result) -> str:
    names = [json.dumps(n, ensure_ascii=False) for n in result.table.column_names]
    cols = [_json_column(c) for c in result.table.columns]
    rows = ["{" + ", ".join(f"{n}: {_json_value(v)}" for n, v in zip(names, row)) + "}"
            for row in zip(*cols)]
    if not rows:
        return "[]"
    return "[\n" + ",\n".join(rows) + "\n]"


def format_result(result: Result, opts: FormatOptions = FormatOptions()) -> str:
    """The text of one result (without its notices and row errors: see the REPL)."""
    if result.table is None:
        return "\n".join([result.status, *result.footer] if result.status
                         else list(result.footer))
    if opts.format == "csv":
        return csv_text(result)
    if opts.format == "json":
        return json_text(result)
    if opts.expanded == "on":
        return expanded(result, opts.null)
    text = aligned(result, opts.null)
    if opts.expanded == "auto" and opts.width and result.table.num_rows and \
            max(display_width(ln) for ln in text.split("\n")) > opts.width:
        return expanded(result, opts.null)
    return text


# ---------------------------------------------------------------------------------------------
# errors, notices, timing


def caret_lines(sql: str, position: int, width: int | None = None) -> list[str]:
    """psql's `LINE n: ...` and the caret under the 1-based character `position`. A line
    longer than `width` is cut around the position, with `...` where text was left out."""
    idx = min(max(position - 1, 0), len(sql))
    line_no = sql.count("\n", 0, idx) + 1
    start = sql.rfind("\n", 0, idx) + 1
    end = sql.find("\n", idx)
    line = sql[start:len(sql) if end < 0 else end].replace("\t", " ").rstrip("\r")
    col = idx - start
    prefix = f"LINE {line_no}: "
    room = (width or 10**9) - len(prefix) - 1
    if display_width(line) > room > 20:
        lo = max(0, col - room // 2)
        hi = lo + room - 6
        if hi > len(line):
            hi = len(line)
            lo = max(0, hi - (room - 6))
        cut = line[lo:hi]
        left = "..." if lo > 0 else ""
        right = "..." if hi < len(line) else ""
        col = col - lo + len(left)
        line = left + cut + right
    caret = " " * (len(prefix) + display_width(line[:col])) + "^"
    return [prefix + line, caret]


def format_error(message: str, *, sqlstate: str | None = None, sql: str | None = None,
                 position: int | None = None, detail: str | None = None,
                 hint: str | None = None, width: int | None = None) -> str:
    """`ERROR:  message (SQLSTATE x)`, then the failing line and a caret when the position
    is known, then DETAIL / HINT."""
    head = f"ERROR:  {message}" + (f" (SQLSTATE {sqlstate})" if sqlstate else "")
    out = [head]
    if sql is not None and position:
        out.extend(caret_lines(sql, position, width))
    if detail:
        out.append(f"DETAIL:  {detail}")
    if hint:
        out.append(f"HINT:  {hint}")
    return "\n".join(out)


def format_row_errors(errors: tuple[RowError, ...] | list[RowError], applied: int) -> str:
    """`ERROR:  2 of 5 rows failed (3 applied)` then each failed row on its own line."""
    n = len(errors)
    total = applied + n
    head = f"ERROR:  {n} of {total} row{'' if total == 1 else 's'} failed ({applied} applied)"
    out = [head]
    for e in sorted(errors, key=lambda e: e.ordinal):
        out.append(f"  row {e.ordinal} ({e.sqlstate}): {e.message}")
    return "\n".join(out)


def format_notice(text: str) -> str:
    return f"NOTICE:  {text}"


def format_elapsed(seconds: float) -> str:
    """psql's \\timing line: `Time: 0.512 ms`, `Time: 61234.500 ms (01:01.235)`."""
    ms = seconds * 1000.0
    out = f"Time: {ms:.3f} ms"
    if seconds >= 1.0:
        total = round(seconds, 3)
        h, rem = divmod(total, 3600)
        m, s = divmod(rem, 60)
        out += f" ({int(h)}:{int(m):02d}:{s:06.3f})" if h else f" ({int(m):02d}:{s:06.3f})"
    return out


def human_bytes(n: int | None) -> str | None:
    """1763 -> '1.7 kB' (powers of 1024, psql's pg_size_pretty uses kB too)."""
    if n is None:
        return None
    size = float(n)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)  # pragma: no cover
