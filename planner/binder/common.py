"""What every part of the binder shares: `Scope` (the aliases one SELECT sees), `position`
(a node's 1-based offset in the statement, for errors), PostgreSQL's output column names,
and the `SubqueryRunner` through which the binder has bound plans run (it never executes).
"""

from __future__ import annotations

import re
from typing import Protocol

import pyarrow as pa
from sqlglot import exp

from planner import logical as L
from planner.errors import FeatureNotSupported, SqlError
from planner.expr import function_name
from planner.expr.located import copy_meta


class SubqueryRunner(Protocol):
    """How the binder has a bound plan run when it needs rows at bind or evaluation time (a
    SubPlan's rows per outer value; the length of a set-returning function's series). The
    statement layer injects one (planner.query.subquery_runner); the binder never
    creates an executor. `rules=False` runs the plan as bound (a fragment of the query
    being bound, which the rules will see later as part of it); `schema_only` computes the
    result's types and no rows."""

    def __call__(self, plan: L.Output, *, rules: bool = True,
                 schema_only: bool = False) -> pa.Table: ...


def need_runner(runner: SubqueryRunner | None, sql: str,
                node: exp.Expression) -> SubqueryRunner:
    """`runner`, or 0A000 when the binder was made without one."""
    if runner is None:
        raise FeatureNotSupported("this query needs a subquery run while it is planned, and "
                                  "no query runner was given", position=position(sql, node))
    return runner


def position(sql: str, node: exp.Expression | None) -> int | None:
    """1-based character offset of `node` in `sql` (PostgreSQL's error position): its own
    token, else its first descendant's (sqlglot keeps positions on identifiers, literals and
    functions), else the nearest ancestor's."""
    if node is not None:
        for d in node.walk(bfs=False):
            start = d.meta_get("start")
            if start is not None:
                return start + 1
    while node is not None:
        meta = node.meta if hasattr(node, "meta") else {}
        if "start" in meta:
            return meta["start"] + 1
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
            m = node.this.meta
            if "start" in m:
                return m["start"] + 1
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            m = node.this.meta
            if "start" in m:
                return m["start"] + 1
        node = node.parent
    return None


def quoted_key(name: str) -> str:
    """A schema-mapping key sqlglot will not case-fold (names are stored exactly)."""
    return '"' + name.replace('"', '""') + '"'


def in_nested_subquery(node: exp.Expression, root: exp.Expression) -> bool:
    """Whether `node` sits inside a subquery nested in `root` (not counting `root` itself)."""
    if node is root:
        return False
    p = node.parent
    while p is not None and p is not root:
        if isinstance(p, (exp.Subquery, exp.Exists)) or (
                isinstance(p, exp.Select) and p is not root):
            return True
        p = p.parent
    return False


def ancestors(node: exp.Expression, root: exp.Expression):
    """Parents of `node` up to (excluding) `root`."""
    if node is root:
        return
    p = node.parent
    while p is not None and p is not root:
        yield p
        p = p.parent


class Scope:
    """Aliases visible in one SELECT: alias -> {column name -> internal key}."""

    def __init__(self, parent: "Scope | None" = None):
        self.parent = parent
        self.aliases: dict[str, dict[str, str]] = {}

    def add(self, alias: str, columns: dict[str, str], node: exp.Expression, sql: str) -> None:
        if alias in self.aliases:
            raise SqlError(f'table name "{alias}" specified more than once', "42712",
                           position(sql, node))
        self.aliases[alias] = columns

    def keys(self) -> set[str]:
        return {k for cols in self.aliases.values() for k in cols.values()}


def output_name(item: exp.Expression) -> str:
    """PostgreSQL's result column name: the alias, the column, the function's name, the
    cast's type (or the name of the column or function cast), else ?column? (qualify's generated `_col_<n>` aliases are not names)."""
    # qualify also aliases a bare expression by sqlglot's `output_name` (`SELECT 1` gets
    # AS "1"): such an alias is not the user's either
    if isinstance(item, exp.Alias) and not re.fullmatch(r"_col_\d+", item.alias) and \
            not (item.alias == item.this.output_name and
                 not isinstance(item.this, exp.Column)):
        return item.alias
    e = item.unalias()
    if isinstance(e, exp.Column):
        return e.name
    if isinstance(e, exp.Cast):
        if isinstance(e.this, (exp.Column, exp.Cast)):  # a cast keeps a column's name
            return output_name(e.this)
        if isinstance(e.this, exp.Func) and not isinstance(e.this, exp.Case) or \
                type(e.this) in _FUNCTION_NAMES:
            return output_name(e.this)       # and a function's (`now()::text` is "now")
        name = type_name(e.to)
        return name.rsplit(".", 1)[-1] if name and name != "userdefined" else "?column?"
    if isinstance(e, exp.Subquery) and isinstance(e.this, exp.Select) and \
            len(e.this.expressions) == 1:
        return output_name(e.this.expressions[0])
    if isinstance(e, exp.Interval):             # INTERVAL '1 day': a typed literal
        return "interval"
    if isinstance(e, exp.WithinGroup):          # percentile_cont(f) WITHIN GROUP (...)
        e = e.this
    if type(e) in _FUNCTION_NAMES:
        return _FUNCTION_NAMES[type(e)]
    if isinstance(e, exp.Func):
        return function_name(e)
    return "?column?"


# PostgreSQL's names of functions sqlglot parses into differently named nodes
_FUNCTION_NAMES: dict[type, str] = {
    exp.CurrentVersion: "version", exp.Explode: "unnest", exp.GroupConcat: "string_agg",
    exp.ArraySize: "array_length", exp.ExplodingGenerateSeries: "generate_series",
    exp.Array: "array", exp.AtTimeZone: "timezone",
}


def rebuild(e: exp.Expression, conv) -> exp.Expression:
    """Copy `e`, replacing nodes for which `conv` returns a node (not descending into them)."""
    r = conv(e)
    if r is not None:
        return r
    new = e.__class__(**{k: v for k, v in e.args.items()
                         if not isinstance(v, (exp.Expression, list))})
    for k, v in e.args.items():
        if isinstance(v, exp.Expression):
            new.set(k, rebuild(v, conv))
        elif isinstance(v, list):
            new.set(k, [rebuild(x, conv) if isinstance(x, exp.Expression) else x for x in v])
    copy_meta(e, new)
    return new


def type_name(dt: exp.Expression | None) -> str | None:
    """The lower-case name of a cast's target type (`regclass`, `int`), None if it has none."""
    if isinstance(dt, exp.ObjectIdentifier):
        return dt.name.lower()
    if isinstance(dt, exp.DataType):
        if dt.this == exp.DataType.Type.USERDEFINED and dt.args.get("kind") is not None:
            return dt.args["kind"].name.lower()
        return dt.this.value.lower() if hasattr(dt.this, "value") else None
    return None
