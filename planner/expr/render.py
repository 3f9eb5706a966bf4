"""SQL text of kudusql's own expression nodes, registered once.

sqlglot dispatches on `<key>_sql` methods it collects per generator class (and caches);
registering the method on the base class reaches every dialect (KuduSQL's generator
included), `.sql()` with no dialect, and caches built before this module was imported.
EXPLAIN and the rules' structural matching print these nodes.
"""

from __future__ import annotations

import math

import pyarrow as pa
import sqlglot.generator
from sqlglot import exp

from planner.logical import AvgOf, SubqueryRef
from planner.expr.interval_values import interval_parts, interval_text
from planner.expr.sqltypes import array_storage, kind_of, sql_type
from planner.expr.core import Const
from planner.expr.casts import to_text
from planner.expr.subplans import HostCall, InSubPlan, SubPlan


def _subplan_sql(self: sqlglot.generator.Generator, e: SubPlan) -> str:
    args = ", ".join(self.sql(x) for x in e.expressions)
    return f"(subplan {e.args['kind']} {id(e.args['plan']):x}({args}))"


def _host_call_sql(self: sqlglot.generator.Generator, e: HostCall) -> str:
    return f"{e.name}({', '.join(self.sql(x) for x in e.expressions)})"


def _sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _scalar_sql(s: pa.Scalar) -> str:
    """A SQL literal for a scalar; typed NULLs and special floats as CASTs."""
    k = kind_of(s.type)
    if not s.is_valid:
        return "NULL" if k == "null" else f"CAST(NULL AS {sql_type(s.type)})"
    if k in ("date", "timestamp"):   # as text: Python's dates stop at year 9999 (and 1 AD)
        return f"{k.upper()} {_sql_string(to_text(s, pa.string(), None).as_py())}"
    v = s.as_py()
    if k == "bool":
        return "TRUE" if v else "FALSE"
    if k == "int":
        return str(v)
    if k == "decimal":
        return format(v, "f")
    if k == "float":
        text = repr(v) if math.isfinite(v) else {"inf": "'Infinity'", "-inf": "'-Infinity'",
                                                 "nan": "'NaN'"}[repr(v)]
        return f"CAST({text} AS {sql_type(s.type)})"
    if k == "string":
        return _sql_string(v)
    if k == "interval":
        return f"INTERVAL {_sql_string(interval_text(*interval_parts(s)))}"
    if k == "binary":
        return f"CAST('\\x{bytes(v).hex()}' AS BYTEA)"
    if k == "list":
        return f"CAST({_sql_string(array_storage(s).as_py())} AS {sql_type(s.type)})"
    return _sql_string(str(v))


def _const_sql(self: sqlglot.generator.Generator, e: Const) -> str:
    return _scalar_sql(e.this)


def _in_subplan_sql(self: sqlglot.generator.Generator, e: InSubPlan) -> str:
    return f"{self.sql(e.this)} IN {self.sql(e.expression)}"


def _avg_of_sql(self: sqlglot.generator.Generator, e: AvgOf) -> str:
    return f"({self.sql(e, 'this')} / {self.sql(e, 'expression')})"


def _subquery_ref_sql(self: sqlglot.generator.Generator, e: SubqueryRef) -> str:
    return f"(subquery {id(e.this):x})"


# Every expression node kudusql adds to sqlglot's, with its SQL text: the one registration.
RENDERERS = {
    Const: _const_sql, SubPlan: _subplan_sql, HostCall: _host_call_sql,
    InSubPlan: _in_subplan_sql, AvgOf: _avg_of_sql, SubqueryRef: _subquery_ref_sql,
}

for _cls, _render in RENDERERS.items():
    setattr(sqlglot.generator.Generator, f"{_cls.key}_sql", _render)
    exp.EXPR_CLASSES.setdefault(_cls.key, _cls)
    for _dispatch in getattr(sqlglot.generator, "_DISPATCH_CACHE", {}).values():
        _dispatch.setdefault(_cls, _render)
