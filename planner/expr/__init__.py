"""The scalar-expression evaluator: sqlglot expression trees over Arrow batches, vectorised.

The planner hands over a sqlglot tree whose aggregates and subqueries are already replaced by
column references, plus a `pa.Table` / `pa.RecordBatch`; `evaluate` returns one Arrow value
per row. Every operator is one or a few `pyarrow.compute` kernels (or numpy, for calendar
arithmetic) over whole columns; no Python code runs per row, with one exception below.

    evaluate(node, batch)
      └── eval_node(node, ctx) ── HANDLERS[type(node)](node, ctx) ──> Value
            Value = pa.Scalar (a constant: literals and whatever only depends on them)
                  | pa.Array | pa.ChunkedArray (one element per row)

Constants stay `pa.Scalar`s all the way up (kernels accept them), so `l_quantity < 24`
never materialises a column of 24s; `evaluate` broadcasts a constant result at the end.
A 0-row batch goes through the same code, which is how the planner learns result types.

Semantics are PostgreSQL's unless noted:

* NULL propagates; AND / OR / NOT are Kleene. `x IN (1, NULL)` is NULL when no match.
* Types. integer op integer -> the wider operand's width, at least int16 (smallint,
  integer, bigint: computed in int64 and checked at that width, past it 22003 "integer out
  of range"; `/` truncates toward zero); any float -> float64; decimal with integer or decimal -> decimal128 following
  Spark's rules with precision capped at 38 (when capping, the scale shrinks but keeps at
  least min(scale, 6) digits):

      a + b, a - b   p = max(p1 - s1, p2 - s2) + max(s1, s2) + 1     s = max(s1, s2)
      a * b          p = p1 + p2 + 1                                 s = s1 + s2
      a / b          s = max(6, s1 + p2 + 1)                         p = p1 - s1 + s2 + s
      a % b          p = min(p1 - s1, p2 - s2) + max(s1, s2)         s = max(s1, s2)

  A kernel whose exact intermediate would not fit decimal128 runs on operands whose declared
  precision is first shrunk to the digits the data actually has (a zero-copy view after one
  `min_max` pass), and on decimal256 if that is still not enough; results are rounded half
  away from zero to the result scale. A value that does not fit its result type is 22003,
  never a silent wrap. Division and % work on the unscaled integers, so declared scales do
  not inflate the kernel's precision. The one per-row path: dividing two columns that both
  hold 38 significant digits (no Arrow kernel can), done with Python's decimal.
  Integer constants combine with decimals as decimal(digits, 0). Literals: `1` is int32
  (int64 past its range, then numeric), `0.06` is decimal(2, 2), `1e3` is float64.
* A bare string literal has PostgreSQL's "unknown" type: next to a typed operand it is cast
  to that type (`o_orderdate >= '1994-01-01'` compares dates; `'abc' + 1` fails with
  22P02 like PostgreSQL). Any other text operand stays text (`text = date` is 42883).
* Dates. date ± interval stays a DATE when the interval has no time part (DuckDB and
  PostgreSQL return a timestamp at midnight; the two compare equal, and a DATE constant
  pushes down to a DATE column), else a TIMESTAMP. Months are added first and clamp to the
  month end (2024-01-31 + 1 month = 2024-02-29), then days, then time. date - date is an
  int64 count of days, date ± integer is a date, timestamp - timestamp is an interval.
  DATE_TRUNC keeps the input type (a date truncates to a date).
* Intervals are values like any other (planner.expr.intervals): columns of them add,
  subtract, scale by numbers (`g * interval '1 second'`), shift timestamps and dates (a
  date plus an interval column is a timestamp), cast from and to text, compare and sort
  with a month as 30 days, and sum / avg / min / max; make_interval, justify_hours /
  justify_days / justify_interval and date_bin take columns too.
* CASE / IIF / COALESCE and the right side of AND / OR are evaluated for all rows at once;
  if that raises a data exception (SQLSTATE class 22, e.g. `CASE WHEN x = 0 THEN 0 ELSE 1/x
  END`), the operand is re-evaluated on just the rows that reach it, so an error surfaces
  only when a row that needs the value has it.

`fold_constants` replaces every maximal constant subtree by a `Const` node holding the
evaluated `pa.Scalar` (its `.sql()` renders a literal such as `DATE '1998-09-02'`), so
`date '1998-12-01' - interval '90' day` is computed once per statement. Bare literals are
left as they are: folding gains nothing and would turn an "unknown" string into text.

Not supported (raise 0A000 or 42883): non-constant patterns and lengths for LIKE, SUBSTRING,
LEFT, RIGHT, LPAD/RPAD, REPLACE, POSITION and TRIM characters; multi-character pad strings;
sum(DISTINCT interval); SIMILAR TO, shifts,
multi-dimensional arrays and array slices; time zones (timestamps are naive UTC
microseconds). sqlglot itself keeps only the first `<n> <unit>` of an interval string that
mixes units with a time (`interval '1 day 02:00'` arrives as `interval '1' day`); `'1 day 2
hours'` is intact.

PostgreSQL compatibility for client catalog queries (planner.expr.arrays, .pgcompat and
.subplans): arrays
(`ArrayType`: ARRAY[...], '{a,b}' literals, subscripts, = ANY / <> ALL, ||, array_to_string,
cardinality, ...), OPERATOR(pg_catalog.~), COLLATE (ignored: one byte-order collation),
E'...' strings, & | #, records of named fields, functions a host provides (`HostCall`, e.g.
the wire layer's catalog functions) and `SubPlan`s, the binder's fallback for subqueries
it cannot turn into joins.

The package, one concept per module, each importing only those above it in this list (the
file layering test fails on a cycle):

    located    where a node is in the statement: errors there, function names
    arrow_values  Value and its shape helpers (broadcast, combine, per_array, view_as)
    decimal_types decimal result types: precision caps, integers as decimals
    sqltypes   Arrow type kinds and PostgreSQL names, the common type, typed NULLs,
               unknown literals, SQL type name -> Arrow type, ArrayType and its storage
    interval_values  interval text in and out, one interval as (months, days, us)
    intervals  interval columns as numpy fields: ± * /, justify, text in and out
    timezones  the session's TimeZone, zone names, local time <-> instants
    core       the dispatch registry (`handles`, `eval_node`), evaluate / evaluate_filter,
               Const, leaves (columns, literals), functions sqlglot leaves anonymous
    casts      CAST: the (kind, kind) -> function table `CASTS`
    coerce     operands of a comparison or a CASE to one type; function-argument checks
    decimals   decimal128/256 arithmetic kernels (rounding, shrinking, the per-row quotient)
    temporal   dates, timestamps and intervals; EXTRACT, DATE_TRUNC, now()
    strings    text functions and LIKE's pattern helpers
    formatting to_char / to_date / to_timestamp(text, format) of dates and timestamps
    arrays     ArrayType values, ANY / ALL, ||, array functions, json_build_object
    logic      AND / OR / NOT, comparisons, IN, LIKE, CASE / COALESCE / NULLIF / GREATEST
    numeric    + - * / %, math functions
    pgcompat   & | #, records, E'' strings, COLLATE, OPERATOR(pg_catalog.op)
    subplans   HostFunction / HostCall, SubPlan / InSubPlan
    folding    fold_constants, statement parameters, constant_value
    render     the SQL text of Const, SubPlan, InSubPlan, HostCall and the plan's own
               AvgOf / SubqueryRef: registered once on sqlglot's Generator

A module adds to the registries it extends (`HANDLERS` through `@handles`, `CASTS`,
`ANONYMOUS`) when imported; this package imports them all.
"""

from __future__ import annotations

from planner.expr import (  # noqa: F401 - imported for their registrations
    arrays,
    arrow_values,
    casts,
    coerce,
    core,
    decimal_types,
    decimals,
    folding,
    formatting,
    interval_values,
    intervals,
    located,
    logic,
    numeric,
    pgcompat,
    render,
    strings,
    sqltypes,
    subplans,
    temporal,
    timezones,
)
from planner.expr.arrays import array_text, array_to_list, list_to_array, parse_array_literal
from planner.expr.casts import arrow_type, cast
from planner.expr.core import Const, column_key, evaluate, evaluate_filter
from planner.expr.folding import (
    coerce_literal_to,
    constant_scalar,
    constant_value,
    fold_constants,
    param_index,
    param_scalar,
    substitute_params,
)
from planner.expr.numeric import IntegerAvg, integer_avg
from planner.expr.subplans import HostCall, HostFunction, InSubPlan, SubPlan
from planner.expr.temporal import statement_clock
from planner.expr.timezones import session_time_zone
from planner.expr.arrow_values import Value
from planner.expr.located import function_name
from planner.expr.sqltypes import ArrayType, pg_name, sql_type, supertype

_REGISTERING = (arrays, arrow_values, casts, coerce, core, decimal_types, decimals, folding,
                interval_values, intervals, located, logic, numeric, pgcompat, render,
                sqltypes, strings, subplans, temporal, timezones)

__all__ = [
    "ArrayType", "Const", "HostCall", "HostFunction", "InSubPlan", "IntegerAvg", "SubPlan",
    "Value", "array_text", "array_to_list", "arrow_type", "cast", "coerce_literal_to",
    "column_key", "constant_scalar", "constant_value", "evaluate", "evaluate_filter",
    "fold_constants", "function_name", "integer_avg", "list_to_array", "param_index",
    "param_scalar", "parse_array_literal", "pg_name", "session_time_zone", "sql_type",
    "statement_clock", "substitute_params", "supertype",
]
