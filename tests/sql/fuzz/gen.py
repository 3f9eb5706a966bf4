"""Random schemas, data and queries for the SQL fuzzers (see tests/sql/fuzz/__init__.py).

Everything is drawn from one `random.Random(seed)`, so a seed names a world and a query.
A query is rendered twice at once (`Sql`: `.k` for kudusql, `.d` for DuckDB) because the
two dialects differ in a few spellings: type names, the default NULL order of DESC (the
DuckDB text always spells PostgreSQL's default out), and time travel (kudusql reads `t FOR
SYSTEM_TIME AS OF <ts>`; DuckDB reads a copy of the table taken at that snapshot).

Kinds of values: int, float, dec, str, bool, date, ts, and iv (interval) and tz
(timestamptz), which only views have (a table cannot store them): `gen_views` derives them
from a table's timestamps, dates and integers. Columns carry a kind, a nullable flag and a
narrower type (tinyint .. bigint, real / double, DECIMAL(p, s)). A time zone is UTC on
both sides (runner.World sets DuckDB's).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from decimal import Decimal

# -- dialect pairs -----------------------------------------------------------------------


class Sql:
    """SQL text for both engines: `k` (kudusql), `d` (DuckDB)."""

    __slots__ = ("d", "k")

    def __init__(self, k: str, d: str | None = None):
        self.k = k
        self.d = k if d is None else d

    def __repr__(self) -> str:
        return self.k if self.k == self.d else f"{self.k}  /* duckdb: {self.d} */"


def j(*parts) -> Sql:
    """Concatenate strings and Sqls."""
    k, d = [], []
    for p in parts:
        if isinstance(p, Sql):
            k.append(p.k)
            d.append(p.d)
        else:
            k.append(str(p))
            d.append(str(p))
    return Sql("".join(k), "".join(d))


def join(sep: str, parts) -> Sql:
    out: list = []
    for i, p in enumerate(parts):
        if i:
            out.append(sep)
        out.append(p)
    return j(*out)


# -- schema and data ---------------------------------------------------------------------

# (kudusql type, DuckDB type, kind)
TYPES = [
    ("TINYINT", "TINYINT", "int"), ("SMALLINT", "SMALLINT", "int"),
    ("INT", "INTEGER", "int"), ("BIGINT", "BIGINT", "int"),
    # REAL is DOUBLE in DuckDB: DuckDB computes `real - integer` in float32, PostgreSQL
    # (and kudusql) in double precision; the values are float32-exact (FLOATS below), so
    # the stored values are the same either way
    ("REAL", "DOUBLE", "float"), ("DOUBLE", "DOUBLE", "float"),
    ("DECIMAL(9,2)", "DECIMAL(9,2)", "dec"), ("DECIMAL(18,4)", "DECIMAL(18,4)", "dec"),
    ("DECIMAL(38,10)", "DECIMAL(38,10)", "dec"),
    ("STRING", "VARCHAR", "str"), ("VARCHAR(5)", "VARCHAR", "str"),
    ("BOOLEAN", "BOOLEAN", "bool"), ("DATE", "DATE", "date"),
    ("TIMESTAMP", "TIMESTAMP", "ts"),
]

INT_RANGE = {"TINYINT": 127, "SMALLINT": 32767, "INT": 2**31 - 1, "BIGINT": 2**63 - 1}
# exactly representable in float32, so REAL and DOUBLE agree after any conversion
FLOATS = [0.0, -0.0, 0.5, -0.5, 1.0, 1.25, -2.0, 3.75, 100.5, -1000.25, 65536.0, float("nan"),
          float("inf"), float("-inf")]
STRINGS = ["", "a", "b", "ab", "abc", "A", "B", " a", "a ", "ba", "xyz", "a%b", "_", "zz"]
DATES = [dt.date(1970, 1, 1), dt.date(2000, 2, 29), dt.date(2024, 12, 31),
         dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(2020, 6, 15), dt.date(1969, 7, 20)]
TIMESTAMPS = [dt.datetime(1970, 1, 1), dt.datetime(2000, 2, 29, 12, 30, 15, 123456),
              dt.datetime(2024, 12, 31, 23, 59, 59, 999999), dt.datetime(2020, 6, 15, 8),
              dt.datetime(1969, 12, 31, 23, 59, 59), dt.datetime(2020, 6, 15, 8, 0, 0, 1)]


@dataclasses.dataclass
class Column:
    name: str
    ktype: str
    dtype: str
    kind: str
    nullable: bool
    key: bool = False


@dataclasses.dataclass
class Table:
    name: str
    columns: list[Column]
    partitions: str                 # the PARTITION BY clause

    def ddl(self) -> tuple[str, str]:
        kcols = ", ".join(f"{c.name} {c.ktype}" + ("" if c.nullable else " NOT NULL")
                          for c in self.columns)
        dcols = ", ".join(f"{c.name} {c.dtype}" for c in self.columns)
        keys = ", ".join(c.name for c in self.columns if c.key)
        return (f"CREATE TABLE {self.name} ({kcols}, PRIMARY KEY ({keys})) {self.partitions}",
                f"CREATE TABLE {self.name} ({dcols})")


def value(rng: random.Random, c: Column, i: int):
    """A random value for column `c` (`i` makes key values distinct)."""
    if c.key:
        if c.kind == "int":
            return i * 3 - 7 if c.ktype != "TINYINT" else i - 60
        return f"k{i:03d}"
    if c.nullable and rng.random() < 0.2:
        return None
    if c.kind == "int":
        lim = INT_RANGE[c.ktype]
        r = rng.random()
        if r < 0.05:
            return rng.choice([lim, -lim - 1])
        return rng.randint(-5, 12) if r < 0.85 else rng.randint(-120, 120)
    if c.kind == "float":
        return rng.choice(FLOATS) if rng.random() < 0.5 else rng.randint(-40, 40) / 4
    if c.kind == "dec":
        scale = int(c.ktype.rstrip(")").split(",")[1])
        digits = rng.choice([1, 3, 5, 7])
        v = Decimal(rng.randint(-10**digits, 10**digits)).scaleb(-min(scale, 2))
        return v
    if c.kind == "str":
        s = rng.choice(STRINGS)
        return s[:5] if c.ktype.startswith("VARCHAR") else s
    if c.kind == "bool":
        return rng.random() < 0.5
    if c.kind == "date":
        return rng.choice(DATES)
    if c.kind == "ts":
        return rng.choice(TIMESTAMPS)
    raise AssertionError(c.kind)


def gen_schema(rng: random.Random, n_tables: int = 3) -> list[Table]:
    tables = []
    for ti in range(n_tables):
        key_t = rng.choice([("INT", "INTEGER", "int"), ("BIGINT", "BIGINT", "int"),
                            ("STRING", "VARCHAR", "str")])
        cols = [Column("k", key_t[0], key_t[1], key_t[2], False, key=True)]
        picks = rng.sample(TYPES, rng.randint(3, 6))
        # every table has an int and a str column, so joins and comparisons find partners
        if not any(p[2] == "int" for p in picks):
            picks.append(("INT", "INTEGER", "int"))
        if not any(p[2] == "str" for p in picks):
            picks.append(("STRING", "VARCHAR", "str"))
        for ci, (kt, dt_, kind) in enumerate(picks):
            cols.append(Column(f"c{ci}", kt, dt_, kind, rng.random() < 0.85))
        parts = rng.choice([
            "", "PARTITION BY HASH (k) PARTITIONS 3",
            "PARTITION BY HASH (k) PARTITIONS 2",
        ] + (["PARTITION BY RANGE (k) (PARTITION VALUES < 10, PARTITION 10 <= VALUES)"]
             if key_t[2] == "int" else []))
        tables.append(Table(f"t{ti}", cols, parts))
    return tables


def gen_rows(rng: random.Random, t: Table, n: int, start: int = 0) -> list[tuple]:
    rows = [tuple(value(rng, c, start + i) for c in t.columns) for i in range(n)]
    # duplicates of non-key values: copy some rows' values under new keys
    for i in range(len(rows)):
        if i and rng.random() < 0.25:
            src = rows[rng.randrange(i)]
            rows[i] = (rows[i][0],) + src[1:]
    return rows


# -- literals ------------------------------------------------------------------------------
def lit(rng: random.Random, kind: str, c: Column | None = None) -> Sql:
    if rng.random() < 0.07:
        return Sql("NULL")
    if kind == "int":
        r = rng.random()
        if r < 0.05:
            return Sql(str(rng.choice([2147483647, -2147483648, 127, -128, 32767])))
        return Sql(str(rng.randint(-5, 12)))
    if kind == "float":
        f = rng.choice([x for x in FLOATS if x == x and abs(x) != float("inf")] +
                       [rng.randint(-40, 40) / 4])
        return Sql(repr(float(f)) if f != 0 else "0.0")
    if kind == "dec":
        return Sql(str(Decimal(rng.randint(-2000, 2000)).scaleb(-2)))
    if kind == "str":
        s = rng.choice(STRINGS)
        return Sql("'" + s.replace("'", "''") + "'")
    if kind == "bool":
        return Sql(rng.choice(["TRUE", "FALSE"]))
    if kind == "date":
        return Sql(f"DATE '{rng.choice(DATES).isoformat()}'")
    if kind == "ts":
        return Sql(f"TIMESTAMP '{rng.choice(TIMESTAMPS).isoformat(sep=' ')}'")
    if kind == "iv":
        return Sql(f"INTERVAL '{rng.choice(INTERVALS)}'")
    if kind == "tz":
        return Sql(f"TIMESTAMPTZ '{rng.choice(TIMESTAMPS).isoformat(sep=' ')}+00'")
    raise AssertionError(kind)


# interval literals without months (DuckDB and PostgreSQL scale a month differently in
# arithmetic) and spans that are equal in different spellings ('1 day' = '24 hours')
INTERVALS = ["1 day", "24 hours", "-2 hours", "90 seconds", "3 days 04:05:06", "0 seconds",
             "36 hours", "00:00:00.5", "-1 days +02:00:00", "7 days"]
# date_bin strides (DuckDB: time_bucket) and origins
STRIDES = ["15 minutes", "1 hour", "1 day", "7 days", "90 seconds", "1 day 2 hours"]
ORIGINS = ["2000-01-01 00:00:00", "2020-06-15 08:07:00", "1969-07-20 20:17:40"]


def literal_value(text: str, kind: str):
    """The Python value of a literal `lit` wrote (a parameter's value)."""
    if kind == "int":
        return int(text)
    if kind in ("float", "dec"):      # `0.5` is numeric in SQL: a Decimal parameter
        return Decimal(text)
    if kind == "str":
        return text[1:-1].replace("''", "'")
    if kind == "bool":
        return text == "TRUE"
    if kind == "date":
        return dt.date.fromisoformat(text[6:-1])
    if kind == "ts":
        return dt.datetime.fromisoformat(text[11:-1])
    raise AssertionError(kind)


def sql_value(v) -> str:
    """A Python value as a SQL literal both engines read the same way."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float):
        if v != v:
            return "CAST('NaN' AS DOUBLE)"
        if v == 0 and str(v).startswith("-"):
            return "CAST('-0' AS DOUBLE)"
        if v in (float("inf"), float("-inf")):
            return f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE)"
        return repr(v)
    if isinstance(v, (int, Decimal)):
        return str(v)
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return "'" + str(v).replace("'", "''") + "'"


NUMERIC = ("int", "float", "dec")
_NULL_TYPE = {"int": "INT", "float": "DOUBLE", "dec": "DECIMAL(9,2)", "str": "VARCHAR",
              "bool": "BOOLEAN", "date": "DATE", "ts": "TIMESTAMP", "iv": "INTERVAL",
              "tz": "TIMESTAMPTZ"}


def comparable(a: str, b: str) -> bool:
    return a == b or (a in NUMERIC and b in NUMERIC)


# -- queries -------------------------------------------------------------------------------
@dataclasses.dataclass
class Col:
    """A column visible in a scope: its SQL (`alias.name`) and kind."""
    sql: str
    kind: str


@dataclasses.dataclass
class Query:
    sql: Sql
    kinds: list[str]                 # output column kinds
    ordered: list[tuple[int, bool]] | None = None   # ORDER BY (position, desc) if it fixes
                                                    # the order (else None)
    total_order: bool = False        # ORDER BY covers every output column
    has_limit: bool = False
    limit: int | None = None         # the outermost LIMIT's count


class QueryGen:
    """Random queries over `tables`. `snapshot` (a HybridTime) makes every table reference
    a time-travel read (DuckDB reads the `<table>_v1` copies then)."""

    def __init__(self, rng: random.Random, tables: list[Table], *,
                 snapshot: int | None = None, subqueries: bool = True,
                 windows: bool = True, params: list | None = None, extended: bool = True,
                 joins: bool | str = True, array_results: bool = True):
        """`params`: a list makes some literals `$n` parameters for kudusql (their values
        are appended to it; DuckDB reads the literal). `extended`: casts, date and
        interval arithmetic, extract, date_trunc, arrays (ANY/ALL, subscripts,
        array_agg), string_agg. `joins` False: one table per FROM; "equi" (large worlds): at
        most two tables, the second joined by one column equality (INNER/LEFT/RIGHT/FULL;
        never a cross product, so a 200K-row table joined to a small one stays linear).
        `array_results` False: no array_agg (asyncpg cannot read arrays from kudusql:
        wire/pg_types.py)."""
        self.rng = rng
        self.tables = tables
        self.snapshot = snapshot
        self.subqueries = subqueries
        self.windows = windows
        self.params = params
        self.extended = extended
        self.joins = joins
        self.array_results = array_results
        self._alias = 0

    def lit(self, kind: str) -> Sql:
        """A literal, or (with `params`) sometimes a `$n` parameter holding its value."""
        s = lit(self.rng, kind)
        if self.params is None or s.k == "NULL" or self.rng.random() < 0.6 or \
                kind in ("iv", "tz"):
            return s
        self.params.append(literal_value(s.k, kind))
        return Sql(f"${len(self.params)}", s.d)

    # -- helpers ---------------------------------------------------------------------------
    def alias(self) -> str:
        self._alias += 1
        return f"a{self._alias}"

    def table_ref(self, t: Table, alias: str) -> Sql:
        if self.snapshot is None:
            return Sql(f"{t.name} AS {alias}")
        return Sql(f"{t.name} FOR SYSTEM_TIME AS OF {self.snapshot} AS {alias}",
                   f"{t.name}_v1 AS {alias}")

    def scope_of(self, t: Table, alias: str) -> list[Col]:
        return [Col(f"{alias}.{c.name}", c.kind) for c in t.columns]

    # -- expressions -----------------------------------------------------------------------
    def expr(self, kind: str, scope: list[Col], depth: int = 0, outer: list[Col] | None = None
             ) -> Sql:
        rng = self.rng
        cols = [c for c in scope if c.kind == kind]
        if depth >= 3 or rng.random() < 0.35:
            if cols and rng.random() < 0.8:
                return Sql(rng.choice(cols).sql)
            return self.lit(kind)
        d = depth + 1
        if self.extended and rng.random() < 0.15:
            e = self.extended_expr(kind, scope, d)
            if e is not None:
                return e
        r = rng.random()
        if r < 0.12:
            return j("CASE WHEN ", self.pred(scope, d), " THEN ", self.expr(kind, scope, d),
                     " ELSE ", self.expr(kind, scope, d), " END")
        if r < 0.22:
            return j("COALESCE(", self.expr(kind, scope, d), ", ", self.expr(kind, scope, d),
                     ")")
        if r < 0.27:
            a, b = self.expr(kind, scope, d), self.expr(kind, scope, d)
            if kind == "float":
                # a "float" literal (-1000.25) is numeric in both systems, and NULLIF(numeric,
                # double) is double in PostgreSQL (the = operator's type) but numeric in
                # DuckDB (the first argument's): the first argument is made a double
                a = j("CAST(", a, " AS DOUBLE)")
            return j("NULLIF(", a, ", ", b, ")")
        if kind == "int":
            r = rng.random()
            if r < 0.3:
                return j("(", self.expr("int", scope, d), rng.choice([" + ", " - "]),
                         self.expr("int", scope, d), ")")
            if r < 0.4:
                return j("(", self.expr("int", scope, d), " * ", rng.randint(-3, 3), ")")
            if r < 0.5:
                return j("(", self.expr("int", scope, d), " % ",
                         rng.choice([1, 2, 3, 7, -4]), ")")
            if r < 0.6:
                return j("abs(", self.expr("int", scope, d), ")")
            if r < 0.7:
                return j("(- ", self.expr("int", scope, d), ")")
            if r < 0.8:
                return j("length(", self.expr("str", scope, d), ")")
            if r < 0.85 and self.subqueries and depth == 0:
                return self.scalar_subquery("int", scope)
            return Sql(rng.choice(cols).sql) if cols else self.lit(kind)
        if kind == "float":
            r = rng.random()
            if r < 0.4:
                return j("(", self.expr("float", scope, d), rng.choice([" + ", " - "]),
                         self.expr(rng.choice(["float", "int"]), scope, d), ")")
            if r < 0.55:
                return j("abs(", self.expr("float", scope, d), ")")
            if r < 0.7:
                return j("(- ", self.expr("float", scope, d), ")")
            return Sql(rng.choice(cols).sql) if cols else self.lit(kind)
        if kind == "dec":
            r = rng.random()
            if r < 0.4:
                return j("(", self.expr("dec", scope, d), rng.choice([" + ", " - "]),
                         self.expr(rng.choice(["dec", "int"]), scope, d), ")")
            if r < 0.5:
                return j("(", self.expr("dec", scope, d), " * ", rng.randint(-3, 3), ")")
            if r < 0.6:
                return j("abs(", self.expr("dec", scope, d), ")")
            return Sql(rng.choice(cols).sql) if cols else self.lit(kind)
        if kind == "str":
            r = rng.random()
            if r < 0.2:
                return j(rng.choice(["lower(", "upper("]), self.expr("str", scope, d), ")")
            if r < 0.4:
                return j("(", self.expr("str", scope, d), " || ", self.expr("str", scope, d),
                         ")")
            if r < 0.5:
                return j("substr(", self.expr("str", scope, d), ", ", rng.randint(1, 3), ", ",
                         rng.randint(0, 3), ")")
            return Sql(rng.choice(cols).sql) if cols else self.lit(kind)
        if kind == "bool":
            return self.pred(scope, d)
        if kind in ("iv", "tz"):
            return self.zoned_expr(kind, scope, d, cols)
        return Sql(rng.choice(cols).sql) if cols else self.lit(kind)

    def zoned_expr(self, kind: str, scope: list[Col], d: int, cols: list[Col]) -> Sql:
        """An interval (iv) or timestamptz (tz) computed per row: interval arithmetic
        (sums, differences, scaling, negation, timestamp - timestamp) and timestamptz
        arithmetic (± an interval, date_trunc, date_bin, a cast from timestamp or date)."""
        rng = self.rng

        def typed(k: str) -> Sql:
            x = self.expr(k, scope, d)
            return Sql(f"CAST(NULL AS {_NULL_TYPE[k]})") if x.k == "NULL" else x
        r = rng.random()
        if kind == "iv":
            if r < 0.25:
                return j("(", typed("iv"), rng.choice([" + ", " - "]), typed("iv"), ")")
            if r < 0.4:
                return j("(", typed("iv"), " * ", rng.choice(["2", "-1", "3", "0"]), ")")
            if r < 0.5:
                return j("(- ", typed("iv"), ")")
            if r < 0.6:
                return j("(", typed("ts"), " - ", typed("ts"), ")")
            if r < 0.7:
                return j("(", typed("tz"), " - ", typed("tz"), ")")
            if r < 0.75:
                return self.interval_expr(scope, d)
        else:
            if r < 0.3:
                return j("(", typed("tz"), rng.choice([" + ", " - "]),
                         rng.choice([typed("iv"), Sql(self.interval())]), ")")
            if r < 0.45:
                unit = rng.choice(["year", "month", "day", "hour", "minute", "second"])
                return j(f"date_trunc('{unit}', ", typed("tz"), ")")
            if r < 0.6:
                return self.date_bin(typed("tz"), "TIMESTAMPTZ", "+00")
            if r < 0.75:
                return j("CAST(", typed(rng.choice(["ts", "date"])), " AS TIMESTAMPTZ)")
        return Sql(rng.choice(cols).sql) if cols else self.lit(kind)

    def date_bin(self, x: Sql, typ: str, offset: str = "") -> Sql:
        """date_bin(stride, x, origin): DuckDB's time_bucket (the same floor, for strides
        without months)."""
        rng = self.rng
        stride = f"INTERVAL '{rng.choice(STRIDES)}'"
        origin = f"{typ} '{rng.choice(ORIGINS)}{offset}'"
        return j(Sql("date_bin(", "time_bucket("), stride, ", ", x, f", {origin})")

    # -- casts, dates and intervals, arrays ---------------------------------------------------
    def interval(self) -> str:
        rng = self.rng
        n = rng.choice([1, 2, 3, 12, 30, 45, -1, -7])
        unit = rng.choice(["day", "days", "month", "months", "hour", "minute", "year",
                           "week"])
        if rng.random() < 0.15:
            return f"INTERVAL '1 year {abs(n)} days'"
        return f"INTERVAL '{n} {unit}'"

    def interval_expr(self, scope: list[Col], d: int) -> Sql:
        """An interval computed per row: timestamp - timestamp, an integer times a fixed
        interval (no months: DuckDB scales a month differently), text cast to interval,
        sums of those."""
        rng = self.rng

        def ts() -> Sql:
            x = self.expr("ts", scope, d)
            return Sql("CAST(NULL AS TIMESTAMP)") if x.k == "NULL" else x

        def small_int() -> Sql:
            cols = [c for c in scope if c.kind == "int"]
            if cols and rng.random() < 0.7:
                return Sql(f"({rng.choice(cols).sql} % 1000)")
            return Sql(str(rng.choice([0, 1, 2, -3, 7, 60, 1000])))
        r = rng.random()
        unit = rng.choice(["1 second", "1 minute", "1 hour", "1 day", "90 seconds",
                           "1 day 2 hours"])
        if r < 0.35:
            return j("(", ts(), " - ", ts(), ")")
        if r < 0.65:
            return j("(", small_int(), f" * INTERVAL '{unit}')")
        if r < 0.8:
            return j("CAST(CAST(", small_int(), " AS VARCHAR) || ",
                     f"'{rng.choice([' seconds', ' minutes', ' hours', ' days'])}' AS INTERVAL)")
        return j("(", self.interval_expr(scope, d + 1) if d < 3 else Sql("INTERVAL '1 hour'"),
                 rng.choice([" + ", " - "]), f"INTERVAL '{unit}')")

    def extended_expr(self, kind: str, scope: list[Col], d: int) -> Sql | None:
        """Casts between kinds, date/interval arithmetic, extract, date_trunc, array
        subscripts; None when nothing fits."""
        rng = self.rng

        def e(k: str, scope: list[Col], d: int) -> Sql:
            # a bare NULL operand typed (`date + NULL` has no one reading in PostgreSQL)
            x = self.expr(k, scope, d)
            return Sql(f"CAST(NULL AS {_NULL_TYPE[k]})") if x.k == "NULL" else x
        if kind == "int":
            r = rng.random()
            if r < 0.15:
                return j("CAST(", e("dec", scope, d), rng.choice([" AS INT)", " AS BIGINT)"]))
            if r < 0.25:
                # quarter-valued floats: .5 rounds to even in both (rint / DuckDB)
                return j("CAST(", e("float", scope, d), " AS BIGINT)")
            if r < 0.32:
                return j("CAST(", self.pred(scope, d), " AS INT)")
            if r < 0.47:
                f = rng.choice(["year", "month", "day", "dow", "doy"])
                return j(f"extract({f} FROM ", e("date", scope, d), ")")
            if r < 0.57:
                # a time field of a column or literal: `date + interval` stays a DATE in
                # kudusql (docs/sql.md), where extract(hour ...) is 42883 as for any date
                ts = [c for c in scope if c.kind == "ts"]
                f = rng.choice(["year", "month", "day", "hour", "minute"])
                arg = Sql(rng.choice(ts).sql) if ts and rng.random() < 0.8 else lit(rng, "ts")
                return j(f"extract({f} FROM ", arg, ")")
            if r < 0.72:
                return j("(", e("date", scope, d), " - ", e("date", scope, d), ")")
            if r < 0.85:
                items = [e("int", scope, d) for _ in range(rng.randint(1, 3))]
                return j("(ARRAY[", join(", ", items), f"])[{rng.randint(0, 4)}]")
            return j("CAST(", e("str", scope, d), " IS NULL AS INT)")
        if kind == "float":
            return j("CAST(", e(rng.choice(["int", "dec"]), scope, d), " AS DOUBLE)")
        if kind == "dec":
            r = rng.random()
            if r < 0.4:
                return j("CAST(", e("int", scope, d), " AS DECIMAL(18,4))")
            if r < 0.7:
                return j("CAST(", e("float", scope, d), " AS DECIMAL(12,1))")
            return j("CAST(", e("dec", scope, d), " AS DECIMAL(12,1))")
        if kind == "str":
            r = rng.random()
            if r < 0.35:
                return j("CAST(", e("int", scope, d), " AS VARCHAR)")
            if r < 0.55:
                return j("CAST(", e("date", scope, d), " AS VARCHAR)")
            if r < 0.7:
                return j("CAST(", self.pred(scope, d), " AS VARCHAR)")
            cols = [c for c in scope if c.kind in ("dec", "ts")]
            if cols:
                return Sql(f"CAST({rng.choice(cols).sql} AS VARCHAR)")
            return None
        if kind == "date":
            r = rng.random()
            if r < 0.5:
                return j("(", e("date", scope, d), rng.choice([" + ", " - "]),
                         rng.choice(["1", "30", "365", "-2", "0"]), ")")
            return j("CAST(", e("ts", scope, d), " AS DATE)")
        if kind == "ts":
            r = rng.random()
            if r < 0.15:                # an interval column moves each row by its own span
                return j("(", e("ts", scope, d), rng.choice([" + ", " - "]),
                         self.interval_expr(scope, d), ")")
            if r < 0.4:
                return j("(", e("ts", scope, d), rng.choice([" + ", " - "]),
                         self.interval(), ")")
            if r < 0.6:
                return j("(", e("date", scope, d), " + ", self.interval(), ")")
            if r < 0.8:
                return j("CAST(", e("date", scope, d), " AS TIMESTAMP)")
            if r < 0.9:
                return self.date_bin(e("ts", scope, d), "TIMESTAMP")
            unit = rng.choice(["year", "month", "day", "hour", "minute"])
            return j(f"date_trunc('{unit}', ", e("ts", scope, d), ")")
        return None

    def array_pred(self, scope: list[Col], d: int) -> Sql:
        """x op ANY / ALL (ARRAY[...])"""
        rng = self.rng
        kind = rng.choice([k for k in ("int", "str", "dec", "date")
                           if k == "int" or any(c.kind == k for c in scope)])
        items = [self.lit(kind) if rng.random() < 0.8 else self.expr(kind, scope, d)
                 for _ in range(rng.randint(1, 4))]
        if all(i.k == "NULL" for i in items):      # ARRAY[NULL] is text[] (42883 for a date)
            x = lit(rng, kind)
            while x.k == "NULL":
                x = lit(rng, kind)
            items.append(x)
        op = rng.choice(["=", "<>", "<", ">="])
        q = rng.choice(["ANY", "ALL"])
        return j("(", self.expr(kind, scope, d), f" {op} {q}(ARRAY[", join(", ", items),
                 "]))")

    def operand_kinds(self, scope: list[Col]) -> str:
        kinds = [c.kind for c in scope if c.kind != "bool"]
        return self.rng.choice(kinds) if kinds else "int"

    def pred(self, scope: list[Col], depth: int = 0) -> Sql:
        rng = self.rng
        d = depth + 1
        if depth >= 3:
            r = rng.random() * 0.55
        else:
            r = rng.random()
        kind = self.operand_kinds(scope)
        if r < 0.22:
            op = rng.choice(["=", "<>", "<", "<=", ">", ">="])
            k2 = kind if kind not in NUMERIC else rng.choice(
                [kind, kind, rng.choice(NUMERIC)])
            return j("(", self.expr(kind, scope, d), f" {op} ", self.expr(k2, scope, d), ")")
        if r < 0.32:
            return j("(", self.expr(kind, scope, d),
                     rng.choice([" IS NULL", " IS NOT NULL"]), ")")
        if r < 0.38:
            return j("(", self.expr(kind, scope, d),
                     rng.choice([" BETWEEN ", " NOT BETWEEN "]), self.lit(kind), " AND ",
                     self.expr(kind, scope, d), ")")
        if r < 0.45:
            items = [self.lit(kind) for _ in range(rng.randint(1, 4))]
            return j("(", self.expr(kind, scope, d), rng.choice([" IN (", " NOT IN ("]),
                     join(", ", items), "))")
        if r < 0.50 and any(c.kind == "str" for c in scope):
            pat = rng.choice(["a%", "%b", "_", "%", "a_", "%a%", "", "A%"])
            return j("(", self.expr("str", scope, d), rng.choice([" LIKE ", " NOT LIKE "]),
                     f"'{pat}')")
        if r < 0.55:
            return j("(", self.expr(kind, scope, d),
                     rng.choice([" IS DISTINCT FROM ", " IS NOT DISTINCT FROM "]),
                     self.expr(kind, scope, d), ")")
        if r < 0.65:
            return j("(NOT ", self.pred(scope, d), ")")
        if r < 0.82:
            return j("(", self.pred(scope, d), rng.choice([" AND ", " OR "]),
                     self.pred(scope, d), ")")
        if r < 0.86:
            bools = [c for c in scope if c.kind == "bool"]
            if bools:
                c = rng.choice(bools).sql
                return Sql(rng.choice([c, f"({c} IS TRUE)", f"({c} IS NOT FALSE)",
                                       f"(NOT {c})"]))
            return Sql(rng.choice(["TRUE", "FALSE", "(NULL::BOOLEAN)"]),
                       None)
        if self.extended and rng.random() < 0.3:
            if rng.random() < 0.35:     # intervals compare by their span
                # a bare NULL operand typed: `(d + INTERVAL ...) - NULL` is an interval in
                # PostgreSQL (timestamp - timestamp) but date - date, an integer, here,
                # where date + interval stays a DATE (docs/sql.md, a documented deviation)
                return j("(", self.interval_expr(scope, d),
                         f" {rng.choice(['=', '<>', '<', '>='])} {self.interval()})")
            return self.array_pred(scope, d)
        if self.subqueries and depth <= 1:
            return self.subquery_pred(scope)
        return j("(", self.expr(kind, scope, d), " = ", self.expr(kind, scope, d), ")")

    # -- subqueries ------------------------------------------------------------------------
    def _correlation(self, inner: list[Col], outer: list[Col]) -> list[Sql]:
        """Conditions tying the subquery to the outer row: an equality (so that the binder
        may decorrelate it) and sometimes a non-equality."""
        rng = self.rng
        conds = []
        pairs = [(i, o) for i in inner for o in outer if comparable(i.kind, o.kind)
                 and i.kind != "bool"]
        if pairs and rng.random() < 0.7:
            i, o = rng.choice(pairs)
            conds.append(Sql(f"{i.sql} = {o.sql}"))
            if rng.random() < 0.3:
                i, o = rng.choice(pairs)
                conds.append(Sql(f"{i.sql} {rng.choice(['<', '<>', '>='])} {o.sql}"))
        return conds

    def _sub_from(self, outer: list[Col]):
        t = self.rng.choice(self.tables)
        a = self.alias()
        inner = self.scope_of(t, a)
        conds = self._correlation(inner, outer) if self.rng.random() < 0.6 else []
        if self.rng.random() < 0.5:
            conds.append(self.pred(inner, 2))
        where = j(" WHERE ", join(" AND ", conds)) if conds else Sql("")
        return self.table_ref(t, a), inner, where

    def subquery_pred(self, outer: list[Col]) -> Sql:
        rng = self.rng
        ref, inner, where = self._sub_from(outer)
        r = rng.random()
        if r < 0.35:
            return j("(", rng.choice(["EXISTS", "NOT EXISTS"]), " (SELECT 1 FROM ", ref,
                     where, "))")
        kinds = [c.kind for c in inner if c.kind != "bool" and
                 any(comparable(c.kind, o.kind) for o in outer)]
        if not kinds:
            return j("(EXISTS (SELECT 1 FROM ", ref, where, "))")
        kind = rng.choice(kinds)
        col = rng.choice([c for c in inner if c.kind == kind]).sql
        lhs_cols = [o for o in outer if comparable(o.kind, kind)]
        lhs = Sql(rng.choice(lhs_cols).sql) if lhs_cols else self.lit(kind)
        if r < 0.75:
            return j("(", lhs, rng.choice([" IN ", " NOT IN "]), "(SELECT ", col, " FROM ",
                     ref, where, "))")
        agg = rng.choice(["max", "min", "count"] if kind != "str" else ["max", "min"])
        op = rng.choice(["=", "<", ">=", "<>"])
        if agg == "count":
            lhs_cols = [o for o in outer if o.kind in NUMERIC]
            lhs = Sql(rng.choice(lhs_cols).sql) if lhs_cols else Sql("1")
        return j("(", lhs, f" {op} (SELECT {agg}({col}) FROM ", ref, where, "))")

    def scalar_subquery(self, kind: str, outer: list[Col]) -> Sql:
        ref, inner, where = self._sub_from(outer)
        cols = [c for c in inner if c.kind == kind]
        if kind == "int" and (not cols or self.rng.random() < 0.4):
            return j("(SELECT count(*) FROM ", ref, where, ")")
        if not cols:
            return self.lit(kind)
        return j(f"(SELECT {self.rng.choice(['max', 'min'])}({self.rng.choice(cols).sql}) "
                 "FROM ", ref, where, ")")

    # -- FROM --------------------------------------------------------------------------------
    def from_clause(self) -> tuple[Sql, list[Col]]:
        rng = self.rng
        equi = self.joins == "equi"
        n = (rng.choice([1, 1, 2]) if equi else rng.choice([1, 1, 1, 2, 2, 3])) \
            if self.joins else 1
        t = rng.choice(self.tables)
        a = self.alias()
        scope = self.scope_of(t, a)
        if rng.random() < 0.08:             # a derived table
            inner_scope = scope
            items = rng.sample(inner_scope, min(len(inner_scope), rng.randint(1, 4)))
            w = j(" WHERE ", self.pred(inner_scope, 1)) if rng.random() < 0.5 else Sql("")
            b = self.alias()
            sel = join(", ", [Sql(f"{c.sql} AS x{i}") for i, c in enumerate(items)])
            src = j("(SELECT ", sel, " FROM ", self.table_ref(t, a), w, f") AS {b}")
            scope = [Col(f"{b}.x{i}", c.kind) for i, c in enumerate(items)]
        else:
            src = self.table_ref(t, a)
        parts = [src]
        on_scope = scope        # what an ON condition may name: PostgreSQL's comma binds
        for _ in range(n - 1):  # looser than JOIN, so ON sees nothing before a comma
            t2 = rng.choice([x for x in self.tables if x is not t] if equi else self.tables)
            a2 = self.alias()
            s2 = self.scope_of(t2, a2)
            kind = rng.choice(["INNER JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"] +
                              ([] if equi else ["CROSS JOIN", ","]))
            if kind in ("CROSS JOIN", ","):
                parts.append(j(f" {kind} " if kind != "," else ", ", self.table_ref(t2, a2)))
                on_scope = s2 if kind == "," else on_scope + s2
            else:
                pairs = [(x, y) for x in on_scope for y in s2
                         if comparable(x.kind, y.kind) and x.kind != "bool"]
                if equi and not pairs:  # no column equality to join on (a derived table of
                    break               # booleans): one table, never a nested loop
                conds = []
                if pairs:
                    x, y = rng.choice(pairs)
                    conds.append(Sql(f"{x.sql} = {y.sql}"))
                if kind == "FULL JOIN" and not conds:
                    kind = "LEFT JOIN"   # kudusql: FULL JOIN needs an equality (0A000)
                if kind != "FULL JOIN" and (not conds or rng.random() < 0.3):
                    conds.append(self.pred(on_scope + s2, 2) if kind == "INNER JOIN" else
                                 self.simple_pred(on_scope + s2))
                parts.append(j(f" {kind} ", self.table_ref(t2, a2), " ON ",
                               join(" AND ", conds)))
                on_scope = on_scope + s2
            scope = scope + s2
        return j(*parts), scope

    def simple_pred(self, scope: list[Col]) -> Sql:
        """A predicate without subqueries (outer join ON conditions)."""
        saved, self.subqueries = self.subqueries, False
        try:
            return self.pred(scope, 1)
        finally:
            self.subqueries = saved

    # -- SELECT ------------------------------------------------------------------------------
    def select(self, *, allow_order: bool = True, want_kinds: list[str] | None = None
               ) -> Query:
        rng = self.rng
        src, scope = self.from_clause()
        where = self.pred(scope) if rng.random() < 0.75 else None
        mode = rng.choices(["plain", "agg", "group", "window", "distinct"],
                           [5, 2, 3, 1 if self.windows else 0, 1])[0]
        if want_kinds is not None:
            mode = rng.choice(["plain", "distinct", "group"])
        items: list[Sql] = []
        kinds: list[str] = []
        group: list[Sql] = []
        having = None
        if mode in ("plain", "distinct", "window"):
            n = len(want_kinds) if want_kinds else rng.randint(1, 4)
            for i in range(n):
                kind = want_kinds[i] if want_kinds else rng.choice(
                    [c.kind for c in scope] + ["int", "bool"])
                if not want_kinds and self.extended and rng.random() < 0.1:
                    if rng.random() < 0.25:      # a timestamptz (UTC on both sides)
                        items.append(j("CAST(", self.expr("ts", scope, 1),
                                       " AS TIMESTAMPTZ)"))
                        kinds.append("ts")
                        continue
                    items.append(self.interval_expr(scope, 1))
                    kinds.append("interval")
                    continue
                items.append(self.expr(kind, scope))
                kinds.append(kind)
            if mode == "window":
                items.append(self.window(scope))
                kinds.append("win")
        else:
            if mode == "group":
                gcols = rng.sample(scope, min(len(scope), rng.randint(1, 2)))
                if want_kinds:
                    gcols = []
                    for k in want_kinds:
                        cand = [c for c in scope if c.kind == k]
                        if not cand:
                            return self.select(allow_order=allow_order, want_kinds=want_kinds)
                        gcols.append(rng.choice(cand))
                group = [Sql(c.sql) for c in gcols]
                for c in gcols:
                    items.append(Sql(c.sql))
                    kinds.append(c.kind)
                if self.extended and not want_kinds and rng.random() < 0.15:
                    group = [self.grouping_sets(group)]
                    if rng.random() < 0.5:
                        items.append(Sql("GROUPING(" + ", ".join(c.sql for c in gcols) + ")"))
                        kinds.append("int")
            if not want_kinds:
                for _ in range(rng.randint(1, 3)):
                    a, k = self.aggregate(scope)
                    items.append(a)
                    kinds.append(k)
                if rng.random() < 0.3:
                    a, k = self.aggregate(scope)
                    if k in NUMERIC:
                        having = j("(", a, rng.choice([" > ", " <= ", " <> "]),
                                   rng.randint(0, 5), ")")
        q = j("SELECT ", "DISTINCT " if mode == "distinct" else "",
              join(", ", items), " FROM ", src)
        if where is not None:
            q = j(q, " WHERE ", where)
        if group:
            q = j(q, " GROUP BY ", join(", ", group))
        if having is not None:
            q = j(q, " HAVING ", having)
        query = Query(q, kinds)
        if allow_order and rng.random() < 0.45:
            self.order_limit(query)
        return query

    def grouping_sets(self, group: list[Sql]) -> Sql:
        """The GROUP BY columns as ROLLUP, CUBE or GROUPING SETS (two random sets and
        the empty one)."""
        rng = self.rng
        cols = join(", ", group)
        style = rng.choice(["ROLLUP", "CUBE", "SETS"])
        if style != "SETS":
            return j(f"{style}(", cols, ")")
        sets = [join(", ", rng.sample(group, rng.randint(1, len(group)))) for _ in range(2)]
        return j("GROUPING SETS ((", sets[0], "), (", sets[1], "), ())")

    def ordered_set(self, num: list[Col], any_: list[Col]) -> tuple[Sql, str]:
        """percentile_cont / percentile_disc / mode() WITHIN GROUP (ORDER BY a column)."""
        rng = self.rng
        fn = rng.choice(["percentile_cont", "percentile_disc", "mode"])
        # not over floats: with an infinity among the values PostgreSQL's lo + (hi - lo) * f
        # is NaN where DuckDB's interpolation gives the infinity (seed 303310012927312)
        exact = [c for c in num if c.kind != "float"]
        if fn == "percentile_cont" and not exact:
            fn = "percentile_disc"
        c = rng.choice(exact if fn == "percentile_cont" else any_)
        frac = "" if fn == "mode" else str(rng.choice([0, 0.1, 0.25, 0.5, 0.75, 0.9, 1]))
        desc = " DESC" if rng.random() < 0.3 else ""
        # PostgreSQL interpolates in double precision; DuckDB keeps a DECIMAL's scale
        duck = f"CAST({c.sql} AS DOUBLE)" if fn == "percentile_cont" else c.sql
        return Sql(f"{fn}({frac}) WITHIN GROUP (ORDER BY {c.sql}{desc})",
                   f"{fn}({frac}) WITHIN GROUP (ORDER BY {duck}{desc})"), \
            "float" if fn == "percentile_cont" else c.kind

    def aggregate(self, scope: list[Col]) -> tuple[Sql, str]:
        rng = self.rng
        r = rng.random()
        if r < 0.2:
            return Sql("count(*)"), "int"
        num = [c for c in scope if c.kind in NUMERIC]
        any_ = [c for c in scope if c.kind != "bool"]
        # percentile_disc / mode of intervals and timestamptz: DuckDB's differ
        plain = [c for c in any_ if c.kind not in ("iv", "tz")]
        if self.extended and 0.82 < r <= 0.9 and plain:
            return self.ordered_set(num, plain)
        if r < 0.55 and num:
            c = rng.choice(num)
            fn = rng.choice(["sum", "avg", "min", "max", "sum", "count"])
            dist = "DISTINCT " if rng.random() < 0.25 else ""
            kind = {"sum": c.kind, "avg": "float" if c.kind != "dec" else "dec",
                    "count": "int"}.get(fn, c.kind)
            arg = self.expr(c.kind, scope, 2) if rng.random() < 0.3 else Sql(c.sql)
            return j(f"{fn}({dist}", arg, ")"), kind
        if self.extended and r > 0.9:
            srt = [c for c in scope
                   if c.kind in (("int", "str") if self.array_results else ("str",))]
            if srt:
                c = rng.choice(srt)
                if c.kind == "str" and (rng.random() < 0.5 or not self.array_results):
                    return Sql(f"string_agg({c.sql}, ',' ORDER BY {c.sql})"), "str"
                return Sql(f"array_agg({c.sql} ORDER BY {c.sql})"), "array"
        if any_:
            c = rng.choice(any_)
            fn = rng.choice(["min", "max", "count"])
            dist = "DISTINCT " if fn == "count" and rng.random() < 0.4 else ""
            return Sql(f"{fn}({dist}{c.sql})"), "int" if fn == "count" else c.kind
        return Sql("count(*)"), "int"

    def window(self, scope: list[Col]) -> Sql:
        rng = self.rng
        part = rng.sample(scope, min(len(scope), rng.randint(0, 2)))
        keys = [c for c in scope if c.sql.endswith(".k")]
        order = rng.sample(scope, min(len(scope), rng.randint(0, 2)))
        fn = rng.choice(["rank()", "dense_rank()", "count(*)", "sum", "min", "max",
                         "row_number()", "lag", "first_value", "percent_rank()",
                         "cume_dist()", "ntile(3)", "last_value", "nth_value"])
        # a ROWS frame over an ORDER BY with ties has no determined result: a total order
        framed = fn in ("sum", "min", "max", "count(*)", "first_value", "last_value",
                        "nth_value") and rng.random() < 0.35
        # a RANGE frame with offsets: one ORDER BY key (an exact number or a date /
        # timestamp); peers share a frame, so no total order is needed
        keyable = [c for c in scope if c.kind in ("int", "dec", "date", "ts")]
        ranged = rng.choice(keyable) if keyable and self.extended and fn in (
            "sum", "min", "max", "count(*)") and rng.random() < 0.25 else None
        if ranged is not None:
            order, framed = [ranged], False
        needs_total = framed or fn in ("row_number()", "lag", "first_value", "ntile(3)",
                                       "last_value", "nth_value")
        if needs_total and {c.sql.split(".")[0] for c in keys} != {
                c.sql.split(".")[0] for c in scope}:
            fn, needs_total = "rank()", False  # a derived table has no key: no total order
            framed = False
        if needs_total:
            order = order + keys          # a total order (the keys of every table)
            if not order:
                fn = "count(*)"
        if fn in ("sum", "min", "max", "lag", "first_value", "last_value", "nth_value"):
            num = [c for c in scope if c.kind in (NUMERIC if fn == "sum" else
                                                  ("int", "str", "dec", "date"))]
            if not num:
                fn = "count(*)"
            else:
                fn = f"{fn}({rng.choice(num).sql}{', 2' if fn == 'nth_value' else ''})"
        spec = []
        if part:
            spec.append("PARTITION BY " + ", ".join(c.sql for c in part))
        if order or fn in ("rank()", "dense_rank()", "row_number()", "percent_rank()",
                           "cume_dist()", "ntile(3)"):
            if not order:
                order = keys or scope[:1]
            spec.append("ORDER BY " + ", ".join(
                f"{c.sql}{' DESC' if rng.random() < 0.3 else ''}" for c in order))
        frame = ""
        if framed and order and fn.split("(")[0] in ("sum", "min", "max", "count",
                                                     "first_value", "last_value",
                                                     "nth_value"):
            frame = " " + self.rows_frame()
        if ranged is not None:
            frame = " " + self.range_frame(ranged.kind)
        k = " ".join(spec)
        # PostgreSQL's default NULL order (first for DESC, last for ASC), spelled out for
        # DuckDB - in the ORDER BY only: the frame after it stays as it is (appending
        # NULLS LAST to it made DuckDB refuse every framed window before)
        d = _asc_nulls_last(k.replace(" DESC", " DESC NULLS FIRST"))
        return Sql(f"{fn} OVER ({k}{frame})", f"{fn} OVER ({d}{frame})")

    def range_frame(self, kind: str) -> str:
        """A RANGE frame with offsets for an ORDER BY key of `kind`: numbers for numbers,
        intervals for dates and timestamps; start at or before end."""
        rng = self.rng
        if kind in ("date", "ts"):
            sizes = ["INTERVAL '1 day'", "INTERVAL '3 days'", "INTERVAL '1 month'"] + (
                ["INTERVAL '12 hours'"] if kind == "ts" else [])
        else:
            sizes = ["0", "1", "2", "5"] + (["0.5", "2.25"] if kind == "dec" else [])
        points = ["UNBOUNDED PRECEDING"] + [f"{rng.choice(sizes)} PRECEDING"] + \
            ["CURRENT ROW"] + [f"{rng.choice(sizes)} FOLLOWING", "UNBOUNDED FOLLOWING"]
        i = rng.randrange(len(points) - 1)
        j = rng.randrange(max(i, 1), len(points))
        return f"RANGE BETWEEN {points[i]} AND {points[j]}"

    def rows_frame(self) -> str:
        """A ROWS frame: bounds from UNBOUNDED PRECEDING to UNBOUNDED FOLLOWING, start at
        or before end (empty frames included: 3 PRECEDING AND 2 PRECEDING)."""
        rng = self.rng
        points = [(-99, "UNBOUNDED PRECEDING")] + [
            (-n, f"{n} PRECEDING") for n in (3, 2, 1)] + [(0, "CURRENT ROW")] + [
            (n, f"{n} FOLLOWING") for n in (1, 2)] + [(99, "UNBOUNDED FOLLOWING")]
        i = rng.randrange(len(points) - 1)
        j = rng.randrange(max(i, 1), len(points))
        if rng.random() < 0.2 and points[i][0] < 0:
            return f"ROWS {points[i][1]}"             # the end is CURRENT ROW
        return f"ROWS BETWEEN {points[i][1]} AND {points[j][1]}"

    def order_limit(self, q: Query) -> None:
        rng = self.rng
        n = len(q.kinds)
        pos = rng.sample(range(n), rng.randint(1, n))
        limit = rng.random() < 0.5
        if limit:
            pos = pos + [p for p in range(n) if p not in pos]    # a total order of rows
        keys = [(p, rng.random() < 0.4) for p in pos]
        k_parts, d_parts = [], []
        for p, desc in keys:
            nulls = rng.choice(["", "", " NULLS FIRST", " NULLS LAST"])
            k_parts.append(f"{p + 1}{' DESC' if desc else ''}{nulls}")
            dn = nulls or (" NULLS FIRST" if desc else " NULLS LAST")
            d_parts.append(f"{p + 1}{' DESC' if desc else ''}{dn}")
        s = Sql(" ORDER BY " + ", ".join(k_parts), " ORDER BY " + ", ".join(d_parts))
        if limit:
            q.limit = rng.randint(0, 8)
            s = j(s, f" LIMIT {q.limit}")
            if rng.random() < 0.3:
                s = j(s, f" OFFSET {rng.randint(0, 3)}")
        q.sql = j(q.sql, s)
        q.ordered = [(p, d) for p, d in keys]
        q.total_order = limit
        q.has_limit = limit

    def query(self) -> Query:
        """A top-level query: a SELECT, sometimes a set operation or a CTE."""
        rng = self.rng
        r = rng.random()
        if r < 0.12:
            left = self.select(allow_order=False)
            if {"win", "array", "interval"} & set(left.kinds):
                return self.select()
            right = self.select(allow_order=False, want_kinds=left.kinds)
            if len(right.kinds) != len(left.kinds):
                return self.select()
            op = rng.choice(["UNION", "UNION ALL", "INTERSECT", "EXCEPT", "INTERSECT ALL",
                             "EXCEPT ALL"])
            q = Query(j("(", left.sql, f") {op} (", right.sql, ")"), left.kinds)
            if rng.random() < 0.3:
                self.order_limit(q)
            return q
        if r < 0.17:
            inner = self.select(allow_order=False)
            if {"win", "array", "interval"} & set(inner.kinds):
                return self.select()
            names = ", ".join(f"w{i}" for i in range(len(inner.kinds)))
            b = self.alias()
            cols = [Col(f"{b}.w{i}", k) for i, k in enumerate(inner.kinds)]
            w = j(" WHERE ", self.simple_pred(cols)) if rng.random() < 0.6 else Sql("")
            q = Query(j(f"WITH cte ({names}) AS (", inner.sql, f") SELECT {names} FROM cte "
                        f"AS {b}", w), inner.kinds)
            return q
        return self.select()


def _asc_nulls_last(s: str) -> str:
    """In a DuckDB window ORDER BY: ascending keys get PostgreSQL's NULLS LAST."""
    if "ORDER BY " not in s:
        return s
    head, tail = s.split("ORDER BY ", 1)
    keys = [k.strip() for k in tail.split(",")]
    keys = [k if "NULLS" in k else k + " NULLS LAST" for k in keys]
    return head + "ORDER BY " + ", ".join(keys)


def base_query(gen: QueryGen) -> tuple[Sql, Sql, list[Col], list[str]]:
    """For TLP / NoREC: (select list, FROM, scope, kinds) of a plain SELECT."""
    rng = gen.rng
    src, scope = gen.from_clause()
    n = rng.randint(1, 3)
    kinds = [rng.choice([c.kind for c in scope]) for _ in range(n)]
    items = [gen.expr(k, scope) if rng.random() < 0.5 else Sql(
        rng.choice([c for c in scope if c.kind == k]).sql) for k in kinds]
    return join(", ", items), src, scope, kinds


# -- views ---------------------------------------------------------------------------------
def gen_views(rng: random.Random, tables: list[Table], n: int | None = None
              ) -> list[tuple[Table, Sql]]:
    """`n` (default 1 or 2) random views, each a `Table` (its columns and kinds: queries
    use it as they use a table) and its `CREATE VIEW` for both engines. A view reads a
    table or an earlier view (a view over a view) and is one of: a projection with a WHERE
    (columns renamed), a GROUP BY (count, max, min per group), or window functions over a
    base table (row_number over its key, count / max per partition). Every view has an int
    and a str column, as every table has, so joins find partners."""
    out: list[tuple[Table, Sql]] = []
    for i in range(rng.randint(1, 2) if n is None else n):
        sources = tables + [v for v, _ in out]
        out.append(_gen_view(rng, rng.choice(sources), f"v{i}"))
    return out


def _gen_view(rng: random.Random, base: Table, name: str) -> tuple[Table, Sql]:
    g = QueryGen(rng, [base], subqueries=False, windows=False, extended=False, joins=False)
    a = g.alias()
    src = {f"{a}.{c.name}": c for c in base.columns}
    scope = g.scope_of(base, a)
    ints = [c for c in scope if c.kind == "int"]
    strs = [c for c in scope if c.kind == "str"]
    keyed = any(c.key for c in base.columns)
    shape = rng.choice(["project", "project", "aggregate"] + (["window"] if keyed else []))
    items: list[tuple[Sql, Column]] = []

    def col(expr: Sql, like: Column | None, ktype: str = "BIGINT", kind: str = "int"):
        i = len(items)
        c = Column(f"c{i}", like.ktype if like else ktype, like.dtype if like else ktype,
                   like.kind if like else kind, True)
        items.append((j(expr, f" AS c{i}"), c))

    where = Sql("")
    group = Sql("")
    if shape == "project":
        picks = [rng.choice(ints), rng.choice(strs)]
        rest = [c for c in scope if c not in picks]
        picks += rng.sample(rest, min(len(rest), rng.randint(0, 3)))
        rng.shuffle(picks)
        for c in picks:
            col(Sql(c.sql), src[c.sql])
        stamps = [c for c in scope if c.kind in ("ts", "date")]
        if rng.random() < 0.5:          # an interval column
            ts = [c for c in stamps if c.kind == "ts"]
            if ts and rng.random() < 0.6:
                e = Sql(f"({rng.choice(ts).sql} - TIMESTAMP '{rng.choice(ORIGINS)}')")
            else:
                e = Sql(f"(({rng.choice(ints).sql} % 1000) * INTERVAL "
                        f"'{rng.choice(STRIDES)}')")
            col(e, None, "INTERVAL", "iv")
        if stamps and rng.random() < 0.5:       # a timestamptz column
            col(Sql(f"CAST({rng.choice(stamps).sql} AS TIMESTAMPTZ)"), None, "TIMESTAMPTZ",
                "tz")
        if rng.random() < 0.6:
            where = j(" WHERE ", g.pred(scope, 1))
    elif shape == "aggregate":
        key = rng.choice([c for c in scope if c.kind in ("str", "int", "bool", "date")])
        col(Sql(key.sql), src[key.sql])
        col(Sql("count(*)"), None)
        m = rng.choice(ints)
        col(Sql(f"max({m.sql})"), src[m.sql])
        s = rng.choice(strs)
        col(Sql(f"min({s.sql})"), src[s.sql])
        group = Sql(f" GROUP BY {key.sql}")
        if rng.random() < 0.4:
            where = j(" WHERE ", g.pred(scope, 1))
    else:
        k = next(c for c in scope if src[c.sql].key)
        part = rng.choice(strs)
        col(Sql(k.sql), src[k.sql])
        col(Sql(part.sql), src[part.sql])
        col(Sql(f"row_number() OVER (ORDER BY {k.sql})"), None)
        col(Sql(f"count(*) OVER (PARTITION BY {part.sql})"), None)
        m = rng.choice(ints)
        col(j(f"max({m.sql}) OVER (PARTITION BY ", part.sql, ")"), src[m.sql])
    body = j("SELECT ", join(", ", [e for e, _ in items]), " FROM ",
             g.table_ref(base, a), where, group)
    view = Table(name, [c for _, c in items], "")
    return view, j(f"CREATE VIEW {name} AS ", body)
