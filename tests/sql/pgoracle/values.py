"""Answers as JSON, and the one rule for comparing kudusql's answer with PostgreSQL's.

An answer is `{"rows": [...]}` (a query), `{"rowcount": n}` (a write) or
`{"error": sqlstate, "message": text}`. Every value in a row is `canon(v)`: None, or a
`[tag, text]` pair, so that a recording is exact (no float or Decimal goes through JSON):

    b  boolean ("t"/"f")      n  integer or numeric, as written (scale kept)
    f  double / real (repr)   s  text
    d  date (ISO)             ts timestamp (ISO; with a time zone: converted to UTC)
    t  time (ISO)             iv interval (microseconds; psycopg's timedelta)
    a  array (PostgreSQL's text form)   x bytea (hex)   j json (sorted keys)

`same(ours, theirs)` is the comparison: values by value, not by type (a numeric's scale or
an integer's width never changes a value):
integers and numerics are equal when numerically equal (1.50 = 1.5); a double against
anything numeric agrees to 1e-9 relative (libm and summation order differ in the last
bits); an array equals its text form (the embedded DB-API returns arrays as text).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re

Canon = list | None


def canon(v) -> Canon:
    if v is None:
        return None
    if isinstance(v, bool):
        return ["b", "t" if v else "f"]
    if isinstance(v, (int, decimal.Decimal)):
        return ["n", str(v)]
    if isinstance(v, float):
        return ["f", repr(v)]
    if isinstance(v, str):
        return ["s", v]
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return ["ts", v.isoformat(sep=" ")]
    if isinstance(v, dt.date):
        return ["d", v.isoformat()]
    if isinstance(v, dt.time):
        return ["t", v.isoformat()]
    if isinstance(v, dt.timedelta):
        return ["iv", str(v // dt.timedelta(microseconds=1))]
    if isinstance(v, (list, tuple)):
        return ["a", _array_text(v)]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return ["x", bytes(v).hex()]
    if isinstance(v, dict):
        return ["j", json.dumps(v, sort_keys=True)]
    raise TypeError(f"no canonical form for {type(v).__name__}: {v!r}")


def _array_text(items) -> str:
    """PostgreSQL's array output: {1,2,NULL}, strings quoted when they need it."""
    out = []
    for x in items:
        if x is None:
            out.append("NULL")
        elif isinstance(x, (list, tuple)):
            out.append(_array_text(x))
        elif isinstance(x, bool):
            out.append("t" if x else "f")
        else:
            s = str(x)
            if s == "" or s.upper() == "NULL" or re.search(r'[{},"\\\s]', s):
                s = '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out.append(s)
    return "{" + ",".join(out) + "}"


def canon_rows(rows) -> list[list[Canon]]:
    return [[canon(v) for v in row] for row in rows]


def _num(c: Canon):
    """The number in a canonical n/f value, else None."""
    if c is None or c[0] not in ("n", "f"):
        return None
    return decimal.Decimal(c[1]) if c[0] == "n" else float(c[1])


def same_value(a: Canon, b: Canon) -> bool:
    if a is None or b is None:
        return a is b
    x, y = _num(a), _num(b)
    if x is not None and y is not None:
        if isinstance(x, decimal.Decimal) and isinstance(y, decimal.Decimal):
            return x == y
        x, y = float(x), float(y)
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return x == y or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    if {a[0], b[0]} <= {"a", "s"}:
        return a[1] == b[1]
    return a == b


def _sort_key(row: list[Canon]):
    """A key that puts equal rows next to each other on both sides (numbers by value, to
    nine digits, so that 1e-9 differences sort alike)."""
    key = []
    for c in row:
        n = _num(c)
        if c is None:
            key.append((0, ""))
        elif n is not None:
            f = float(n)
            key.append((1, "nan" if math.isnan(f) else f"{f:+.9e}"))
        else:
            key.append((2, c[0] if c[0] not in ("a", "s") else "s", c[1]))
    return [(k[0], str(k[1:])) for k in key]


def same(ours: dict, theirs: dict, ordered: bool) -> str | None:
    """None when the answers agree, else one line saying how they differ."""
    if "error" in theirs or "error" in ours:
        if ours.get("error") == theirs.get("error"):
            return None
        return f"kudusql {_brief(ours)}; PostgreSQL {_brief(theirs)}"
    if "rowcount" in theirs or "rowcount" in ours:
        if ours.get("rowcount") == theirs.get("rowcount"):
            return None
        return f"kudusql {_brief(ours)}; PostgreSQL {_brief(theirs)}"
    a, b = ours["rows"], theirs["rows"]
    if len(a) != len(b):
        return f"kudusql {len(a)} rows; PostgreSQL {len(b)} rows"
    if any(len(r) != len(s) for r, s in zip(a, b)):
        return f"kudusql {len(a[0])} columns; PostgreSQL {len(b[0])} columns"
    if not ordered:
        a, b = sorted(a, key=_sort_key), sorted(b, key=_sort_key)
    for i, (r, s) in enumerate(zip(a, b)):
        if not all(same_value(x, y) for x, y in zip(r, s)):
            where = "row" if ordered else "row (sorted)"
            return f"{where} {i + 1}: kudusql {_show(r)}; PostgreSQL {_show(s)}"
    return None


def _show(row: list[Canon]) -> str:
    return "(" + ", ".join("NULL" if c is None else repr(c[1]) for c in row) + ")"


def _brief(answer: dict) -> str:
    if "error" in answer:
        return f"error {answer['error']} ({answer.get('message', '')[:80]})"
    if "rowcount" in answer:
        return f"row count {answer['rowcount']}"
    return f"{len(answer['rows'])} rows"


def ordered(sql: str) -> bool:
    """Whether the statement's own (outermost) ORDER BY fixes the order of its rows. The
    corpus breaks ties, so an outer ORDER BY is taken as a total order."""
    depth, outer = 0, []
    for ch in sql:
        depth += ch == "("
        if depth == 0:
            outer.append(ch)
        depth -= ch == ")"
    return re.search(r"\bORDER\s+BY\b", "".join(outer), re.I) is not None
