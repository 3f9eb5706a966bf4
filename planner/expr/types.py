"""Value types of the evaluator: Arrow type kinds, PostgreSQL type names, decimal result types,
the SQL array type (`ArrayType`, an extension type over the array's text form) and interval
values (parse, render), plus the error helpers every module raises through (`_err` locates
the node in the statement). Imports nothing else of planner.expr.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.errors import SqlError, UndefinedObject

Value = pa.Scalar | pa.Array | pa.ChunkedArray

_MAX_PRECISION = 38
_MAX_PRECISION_256 = 76
_MIN_ADJUSTED_SCALE = 6
_US_PER_DAY = 86_400_000_000
_DECIMAL_CTX = decimal.Context(prec=200)
_DEFAULT_NUMERIC = pa.decimal128(38, 10)  # CAST(x AS NUMERIC) of a non-exact value
_HALF_AWAY = "half_towards_infinity"


def _position(node: exp.Expr | None) -> int | None:
    """1-based character offset of the first located token under `node` (None if unknown)."""
    if node is None:
        return None
    starts = [n._meta["start"] for n in node.walk() if n._meta and "start" in n._meta]
    return min(starts) + 1 if starts else None


_FUNC_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\(|$)")
_FUNC_NAMES: dict[type, str] = {}


def function_name(node: exp.Func) -> str:
    """A function call's name as PostgreSQL spells it, lower case, for messages and output
    column names: sqlglot's class names are not SQL (TimeToStr is to_char, JSONArrayAgg is
    json_agg, CurrentVersion is version), so the name is read off the node rendered in
    PostgreSQL's dialect, once per node class, where it renders as a call `name(...)` or a
    bare keyword (CURRENT_USER); operators that sqlglot models as functions (AND, ~, ->,
    COLLATE) keep the class name."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    name = _FUNC_NAMES.get(type(node))
    if name is None:
        try:
            m = _FUNC_NAME.match(node.sql(dialect="postgres"))
        except Exception:  # noqa: BLE001 - a node the generator cannot render: its class name
            m = None
        name = _FUNC_NAMES[type(node)] = m.group(1).lower() if m else node.sql_name().lower()
    return name


_INTERNAL_COLUMN = re.compile(r'"([^"#]+)#\d+\.([^"]+)"')


def user_sql(node: exp.Expr) -> str:
    """`node` as SQL for a message, its column references as the user wrote them (`t.v`,
    not the binder's internal `"t#1.v"`: planner/binder gives every FROM item a numbered
    prefix)."""
    return _INTERNAL_COLUMN.sub(r"\1.\2", node.sql())


def _err(message: str, sqlstate: str, node: exp.Expr | None) -> SqlError:
    return SqlError(message, sqlstate, _position(node))


# -- Arrow type helpers ----------------------------------------------------------------------

_INTERVAL = pa.month_day_nano_interval()
_TS = pa.timestamp("us")
_TSTZ = pa.timestamp("us", tz="UTC")      # timestamptz: an instant (planner.expr.timezones)


def _kind(t: pa.DataType) -> str:
    """The SQL type family of an Arrow type."""
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if t == _INTERVAL:
        return "interval"
    if pa.types.is_time(t):
        return "time"
    if isinstance(t, ArrayType) or pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list"
    return "other"


_NUMERIC = ("int", "float", "decimal")


def _pg_name(t: pa.DataType) -> str:
    """PostgreSQL's name for an Arrow type (for error messages)."""
    k = _kind(t)
    if k == "int":
        return {8: "tinyint", 16: "smallint", 32: "integer", 64: "bigint"}[t.bit_width]
    if k == "float":
        return "real" if t.bit_width == 32 else "double precision"
    if k == "list":
        return _pg_name(t.value_type) + "[]"
    if k == "timestamp" and t.tz:
        return "timestamp with time zone"
    return {"null": "unknown", "bool": "boolean", "decimal": "numeric", "string": "text",
            "binary": "bytea", "date": "date", "timestamp": "timestamp without time zone",
            "interval": "interval", "time": "time without time zone"}.get(k, str(t))


def _sql_type(t: pa.DataType) -> str:
    """A SQL spelling of an Arrow type (for rendering typed constants)."""
    k = _kind(t)
    if k == "int":
        return {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}[t.bit_width]
    if k == "float":
        return "REAL" if t.bit_width == 32 else "DOUBLE PRECISION"
    if k == "decimal":
        return f"DECIMAL({t.precision}, {t.scale})"
    if k == "list":
        return _sql_type(t.value_type) + "[]"
    if k == "timestamp" and t.tz:
        return "TIMESTAMPTZ"
    return {"bool": "BOOLEAN", "string": "TEXT", "binary": "BYTEA", "date": "DATE",
            "timestamp": "TIMESTAMP", "interval": "INTERVAL", "time": "TIME"}.get(k, str(t))


_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def _decimal_type(p: int, s: int) -> pa.DataType:
    return pa.decimal128(p, s) if p <= _MAX_PRECISION else pa.decimal256(p, s)


def _cap(p: int, s: int) -> pa.DataType:
    """Spark's precision cap: at most 38 digits, dropping scale but keeping min(s, 6)."""
    if p <= _MAX_PRECISION:
        return pa.decimal128(max(p, 1), s)
    int_digits = p - s
    s = max(_MAX_PRECISION - int_digits, min(s, _MIN_ADJUSTED_SCALE))
    return pa.decimal128(_MAX_PRECISION, s)


def _int_as_decimal_type(t: pa.DataType) -> pa.DataType:
    return pa.decimal128(_INT_DIGITS[t.bit_width], 0)


def _digits(n: int) -> int:
    return len(str(abs(n)))


def _int_to_decimal(v: Value) -> Value:
    """An integer value as a decimal: a constant gets exactly its digits, a column its width."""
    if isinstance(v, pa.Scalar):
        x = v.as_py()
        t = pa.decimal128(1 if x is None else _digits(x), 0)
        return pa.scalar(None if x is None else decimal.Decimal(x), t)
    return v.cast(_int_as_decimal_type(v.type))


def _supertype(types: list[pa.DataType], operator: bool = False) -> pa.DataType | None:
    """The common type values of `types` are combined in (UNION, CASE, COALESCE, GREATEST,
    IN lists, VALUES), or with `operator` compared or computed in (=, <, +); None if there
    is none. They differ for REAL only, as in PostgreSQL: the common type of real and an
    integer or numeric is real (numeric casts to real implicitly), while `real = numeric`
    and `real + integer` resolve to double precision operators."""
    ts = [t for t in types if _kind(t) != "null"]
    if not ts:
        return pa.null()
    first = ts[0]
    if all(t == first for t in ts):
        return first
    kinds = {_kind(t) for t in ts}
    if kinds <= set(_NUMERIC):
        if "float" in kinds:
            if not operator and all(pa.types.is_float32(t) for t in ts if _kind(t) == "float"):
                return pa.float32()
            return pa.float64()
        if "decimal" in kinds:
            decs = [_int_as_decimal_type(t) if _kind(t) == "int" else t for t in ts]
            int_digits = max(t.precision - t.scale for t in decs)
            scale = max(t.scale for t in decs)
            return _cap(int_digits + scale, scale)
        return max(ts, key=lambda t: t.bit_width)
    if kinds == {"string"}:
        return pa.large_string() if any(pa.types.is_large_string(t) for t in ts) else pa.string()
    if kinds <= {"date", "timestamp"}:
        if any(_kind(t) == "timestamp" and t.tz for t in ts):
            return _TSTZ         # timestamp and date read in the session's zone
        return next((t for t in ts if _kind(t) == "timestamp"), _TS)
    if kinds <= {"string", "binary"}:
        return pa.binary()
    return None


def _broadcast(v: Value, n: int) -> pa.Array | pa.ChunkedArray:
    if not isinstance(v, pa.Scalar):
        return v
    if _kind(v.type) == "null":
        return pa.nulls(n)
    return pa.repeat(v, n)


def _combine(v: pa.Array | pa.ChunkedArray) -> pa.Array:
    return v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v


def _per_array(fn: Callable[[pa.Array], pa.Array], v: Value) -> Value:
    """Apply an Array -> Array function to a scalar (as a 1-element array), array or chunks."""
    if isinstance(v, pa.Scalar):
        return fn(pa.repeat(v, 1))[0]
    if isinstance(v, pa.ChunkedArray):
        if v.num_chunks == 0:
            return pa.chunked_array([], type=fn(pa.array([], type=v.type)).type)
        return pa.chunked_array([fn(c) for c in v.chunks])
    return fn(v)


def _view(v: Value, t: pa.DataType) -> Value:
    """Reinterpret a decimal's stored integers under another same-width decimal type (zero
    copy, unchecked: callers choose a precision the data fits, or know why it need not)."""
    if isinstance(v, pa.Scalar):
        return pa.repeat(v, 1).view(t)[0]
    if isinstance(v, pa.ChunkedArray):
        return pa.chunked_array([c.view(t) for c in v.chunks], type=t)
    return v.view(t)


def _any(v: Value) -> bool:
    """Whether a boolean value (a scalar, or any row of an array) is true; NULL is not."""
    return bool(v.as_py()) if isinstance(v, pa.Scalar) else bool(pc.any(v).as_py())


def _null_of(t: pa.DataType) -> pa.Scalar:
    if isinstance(t, ArrayType):
        return pa.ExtensionScalar.from_storage(t, None)
    return pa.scalar(None, t)


def _is_unknown_literal(node: exp.Expr) -> bool:
    """A bare string literal: PostgreSQL's "unknown" type, resolved from its context."""
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal) and node.is_string


def _to_numpy(a: pa.Array, dtype: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Values (nulls as 0) and the null mask (None if no nulls) of an integer-like array."""
    mask = a.is_null().to_numpy(zero_copy_only=False) if a.null_count else None
    vals = pc.fill_null(a, 0) if a.null_count else a
    return vals.to_numpy(zero_copy_only=False).astype(dtype, copy=False), mask


def _as_width(v: Value, bits: int) -> Value:
    t = v.type
    if t.bit_width == bits:
        return v
    return v.cast(pa.decimal256(t.precision, t.scale) if bits == 256
                  else pa.decimal128(t.precision, t.scale))


# -- dates, timestamps and intervals ---------------------------------------------------------

_UNIT_ALIASES = {
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
_UNIT_SIZES = {
    "millennium": (12000, 0, 0), "century": (1200, 0, 0), "decade": (120, 0, 0),
    "year": (12, 0, 0), "quarter": (3, 0, 0), "month": (1, 0, 0), "week": (0, 7, 0),
    "day": (0, 1, 0), "hour": (0, 0, 3_600_000_000), "minute": (0, 0, 60_000_000),
    "second": (0, 0, 1_000_000), "millisecond": (0, 0, 1_000), "microsecond": (0, 0, 1),
}

_INTERVAL_TOKEN = re.compile(
    r"\s*(?:(?P<tsign>[+-]?)(?P<h>\d+):(?P<mi>\d+)(?::(?P<sec>\d+(?:\.\d*)?))?"
    r"|(?P<num>[+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*(?P<unit>[a-z]+)?|(?P<ago>ago))\s*")


def _parse_interval(text: str, unit: str | None, node: exp.Expr | None) -> tuple[int, int, int]:
    """PostgreSQL interval input ('3', unit MONTH; '1 year 2 mons'; '1 day 02:00') ->
    (months, days, microseconds). Fractions spill into smaller units as PostgreSQL does
    (a month is 30 days, a day 24 hours)."""
    def bad() -> SqlError:
        return _err(f'invalid input syntax for type interval: "{text}"', "22007", node)

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
            canonical = _UNIT_ALIASES.get((name or "second").lower())
            if canonical is None:
                raise bad()
            dm, dd, dus = _add_scaled(decimal.Decimal(m.group("num")),
                                      _UNIT_SIZES[canonical])
            months, days, us = months + dm, days + dd, us + dus
    if negate:
        months, days, us = -months, -days, -us
    return months, days, us


def _add_scaled(n: decimal.Decimal, size: tuple[int, int, int]) -> tuple[int, int, int]:
    m_size, d_size, us_size = size
    months = n * m_size
    whole_m = int(months)
    days = n * d_size + (months - whole_m) * 30
    whole_d = int(days)
    us = n * us_size + (days - whole_d) * _US_PER_DAY
    return whole_m, whole_d, int(us.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def _interval_scalar(months: int, days: int, us: int) -> pa.Scalar:
    return pa.scalar(pa.MonthDayNano([months, days, us * 1000]), _INTERVAL)


def _interval_parts(v: pa.Scalar) -> tuple[int, int, int]:
    mdn = v.as_py()
    return mdn.months, mdn.days, mdn.nanoseconds // 1000


def _interval_text(months: int, days: int, us: int) -> str:
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


# -- PostgreSQL compatibility: arrays, ANY / ALL, OPERATOR(), E'' strings ------------------
#
# A SQL array is an `ArrayType` column: an Arrow extension type whose storage is the
# array's PostgreSQL text form ('{1,2}', '{a,"b c",NULL}') and whose `value_type` is the
# element type. Text storage lets arrays pass through every executor operator (Acero's hash
# join carries no list columns) and go out on the wire as they are. Array functions work on
# Arrow list arrays: `_as_list` parses the text (one split kernel; a Python loop only for
# quoted elements), `_as_array` formats it back (`array_text`, vectorised). Arrays are
# one-dimensional with lower bound 1 (PostgreSQL's int2vector and oidvector start at 0;
# they are read as 1-based here). A bare string literal next to an array is an array literal
# ('{r,p,""}'), as PostgreSQL resolves the unknown type from its context.


def _type_from_str(text: str) -> pa.DataType:
    """An Arrow type from its str() (ArrayType's serialized element type): the aliases
    pyarrow knows, plus the parameterised decimal128(p, s) / timestamp[unit] / date32[day]
    it does not."""
    m = re.fullmatch(r"decimal128\((\d+), (\d+)\)", text)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"timestamp\[(\w+)\]", text)
    if m:
        return pa.timestamp(m.group(1))
    return pa.type_for_alias({"date32[day]": "date32", "date64[ms]": "date64"}.get(text, text))


class ArrayType(pa.ExtensionType):
    """A one-dimensional SQL array of `value_type` (storage: its text form)."""

    def __init__(self, value_type: pa.DataType):
        self.value_type = value_type
        super().__init__(pa.string(), "kudusql.array")

    def __arrow_ext_serialize__(self) -> bytes:
        return str(self.value_type).encode()

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes
                                  ) -> ArrayType:
        return cls(_type_from_str(serialized.decode()))

    def __reduce__(self):
        return ArrayType, (self.value_type,)

    def __hash__(self) -> int:
        return hash(("kudusql.array", str(self.value_type)))

# SQL type names sqlglot leaves as user-defined or object identifiers (`x::oid`,
# `x::pg_catalog.text`, `x::"char"`): reg* values are OIDs, vectors are arrays.
_NAMED_TYPES: dict[str, pa.DataType] = {
    **dict.fromkeys(("text", "varchar", "character varying", "name", "char", "character",
                     "bpchar", "json", "jsonb", "pg_node_tree", "aclitem", "unknown",
                     "cstring", "uuid"), pa.string()),
    **dict.fromkeys(("int2", "smallint"), pa.int16()),
    **dict.fromkeys(("int4", "integer", "int"), pa.int32()),
    **dict.fromkeys(("int8", "bigint", "oid", "xid", "cid"), pa.int64()),
    # reg* values are OIDs that read and print as names: the catalog wrapper binds these
    # casts to its lookups (planner.binder.pg_functions host_call); what is left, e.g. the
    # type of a parameter cast to regclass, is the name
    **dict.fromkeys(("regclass", "regtype", "regproc", "regprocedure", "regnamespace",
                     "regrole", "regoper", "regoperator", "regconfig", "regdictionary",
                     "regcollation"), pa.string()),
    **dict.fromkeys(("float4", "real"), pa.float32()),
    **dict.fromkeys(("float8", "double precision"), pa.float64()),
    **dict.fromkeys(("bool", "boolean"), pa.bool_()),
    "numeric": _DEFAULT_NUMERIC, "decimal": _DEFAULT_NUMERIC, "date": pa.date32(),
    "timestamp": _TS, "timestamptz": _TSTZ, "bytea": pa.binary(), "interval": _INTERVAL,
    "int2vector": ArrayType(pa.int16()), "oidvector": ArrayType(pa.int64()),
}


def _named_type(name: str, node: exp.Expr) -> pa.DataType:
    n = name.strip().strip('"').lower()
    n = n.removeprefix("pg_catalog.")
    if n.endswith("[]"):
        return ArrayType(_named_type(n[:-2], node))
    t = _NAMED_TYPES.get(n)
    if t is None:
        raise UndefinedObject(f'type "{n}" does not exist', position=_position(node))
    return t


def _is_array(v: Value) -> bool:
    return isinstance(v.type, ArrayType)


def _storage(v: Value) -> Value:
    """An array Value's text form (storage)."""
    if isinstance(v, pa.Scalar):
        return pa.scalar(v.value.as_py() if v.is_valid else None, pa.string())
    if isinstance(v, pa.ChunkedArray):
        return pa.chunked_array([c.storage for c in v.chunks], pa.string())
    return v.storage


def _wrap(v: Value, t: ArrayType) -> Value:
    """Text Value -> array Value of type `t` (the text must be in canonical form)."""
    if isinstance(v, pa.Scalar):
        return pa.ExtensionScalar.from_storage(t, v.as_py())
    if isinstance(v, pa.ChunkedArray):
        return pa.chunked_array([pa.ExtensionArray.from_storage(t, c) for c in v.chunks], t)
    return pa.ExtensionArray.from_storage(t, v)
