"""The logical plan: plain data the binder builds, the rules rewrite and the executor runs.

Every node produces a relation whose columns have *internal keys*: unique strings such as
`lineitem#2.l_orderkey` (a scan's alias, a per-statement relation number, the column) or
`$agg3` (a computed value). Expressions inside nodes are sqlglot trees whose `exp.Column`s
carry exactly one internal key as their name (no table part), so `planner.expr.evaluate`
resolves them against the input batch by name. Only the final `Project` gives columns their
user-visible names, which may repeat.

Nodes (children first in each dataclass):
  Scan        one table (or a table_changes() diff) with pushed ColumnPredicates, a residual
              filter and the needed columns; `snapshot` is a timestamp expression or None
  Values      literal rows
  Filter      rows where `condition` is TRUE
  Project     computed columns (key, expression)
  MultiJoin   an inner join of several inputs on a conjunction; the executor orders the
              joins greedily from the real input sizes (`planner.executor`)
  Join        a binary join: left/full outer, semi, anti (NOT IN's null-aware anti as
              `null_aware`); equi keys plus an optional residual condition
  Aggregate   GROUP BY keys (and grouping sets) and aggregate calls
  Window      window functions (PARTITION BY / ORDER BY / frame) appended as columns
  Sort        ORDER BY keys, optional top-N limit
  Limit       LIMIT / OFFSET
  Distinct    duplicate elimination on all columns
  SetOp       UNION / INTERSECT / EXCEPT [ALL]
  RecursiveUnion  WITH RECURSIVE: an anchor, then a recursive term over its WorkTable
  WorkTable   the rows the last step of a RecursiveUnion added

Nodes (and AggCall, WindowCall, SortKey, Output) are frozen dataclasses: a stage that
changes a plan builds a new one (`dataclasses.replace`; `with_children`, `map_expressions`
and `rewrite_nodes` rebuild a path or every node, sharing what did not change), so the
bound plan the plan cache keeps is never edited by the rules. Their list fields are still
lists, by convention not modified after construction; the sqlglot expressions inside are
sqlglot's mutable trees, shared between a plan and the plans rebuilt from it, so no stage
edits one in place (`with_subquery_plans` copies an expression before pointing its
SubqueryRef at the subquery's new plan). The plan helpers every stage shares live here too: `conjuncts`, `and_all`, `keycol`,
`refs`, `output_keys`, `all_nodes`, and the plan-only expression nodes `SubqueryRef` and
`AvgOf` (their SQL text: planner.expr.render).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from sqlglot import exp


@functools.cache
def _field_names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@dataclasses.dataclass(frozen=True)
class Node:
    def children(self) -> list["Node"]:
        out: list[Node] = []
        for name in _field_names(type(self)):
            v = getattr(self, name)
            if isinstance(v, Node):
                out.append(v)
            elif isinstance(v, list):
                out.extend(c for c in v if isinstance(c, Node))
        return out

    def expressions(self) -> list[exp.Expression]:
        """Every expression the node evaluates (for column pruning and subquery resolution)."""
        return []

    def label(self) -> str:
        return type(self).__name__


@dataclasses.dataclass(frozen=True)
class Scan(Node):
    table: str                       # catalog table name
    alias: str                       # user alias
    prefix: str                      # internal key prefix: `<alias>#<n>`
    columns: list[str]               # table columns to read (pruned by the rules)
    filters: list[exp.Expression] = dataclasses.field(default_factory=list)
    pushed: list[Any] = dataclasses.field(default_factory=list)   # engine ColumnPredicates
    snapshot: exp.Expression | None = None    # FOR SYSTEM_TIME AS OF <expr>
    changes: tuple[exp.Expression, exp.Expression] | None = None  # table_changes(from, to)
    pruned: tuple[int, int] | None = None     # (tablets scanned, tablets in the table)

    def key(self, column: str) -> str:
        return f"{self.prefix}.{column}"

    def expressions(self):
        return list(self.filters) + ([self.snapshot] if self.snapshot is not None else []) \
            + (list(self.changes) if self.changes else [])

    def label(self):
        what = f"table_changes({self.table})" if self.changes else self.table
        alias = f" AS {self.alias}" if self.alias != self.table else ""
        return f"Scan {what}{alias}"


@dataclasses.dataclass(frozen=True)
class Values(Node):
    keys: list[str]
    rows: list[list[exp.Expression]]

    def expressions(self):
        return [e for r in self.rows for e in r]

    def label(self):
        return f"Values {len(self.rows)} row(s)"


@dataclasses.dataclass(frozen=True)
class Filter(Node):
    input: Node
    condition: exp.Expression

    def expressions(self):
        return [self.condition]


@dataclasses.dataclass(frozen=True)
class Project(Node):
    input: Node
    items: list[tuple[str, exp.Expression]]     # (output key, expression)

    def expressions(self):
        return [e for _, e in self.items]


@dataclasses.dataclass(frozen=True)
class MultiJoin(Node):
    inputs: list[Node]
    conditions: list[exp.Expression]

    def expressions(self):
        return list(self.conditions)

    def label(self):
        return f"InnerJoin {len(self.inputs)} inputs"


@dataclasses.dataclass(frozen=True)
class Join(Node):
    left: Node
    right: Node
    kind: str                                  # "left", "full", "semi", "anti"
    left_keys: list[exp.Expression]
    right_keys: list[exp.Expression]
    residual: exp.Expression | None = None
    null_aware: bool = False                   # NOT IN semantics for an anti join

    def expressions(self):
        return list(self.left_keys) + list(self.right_keys) + (
            [self.residual] if self.residual is not None else [])

    def label(self):
        kind = {"left": "LeftJoin", "full": "FullJoin", "semi": "SemiJoin",
                "anti": "NullAwareAntiJoin" if self.null_aware else "AntiJoin"}[self.kind]
        return kind


@dataclasses.dataclass(frozen=True)
class AggCall:
    key: str                                   # output key
    func: str                                  # sum, count, count_star, min, max, avg, ...
    arg: exp.Expression | None
    distinct: bool = False
    # array_agg / list_agg (string_agg's values), the ordered-set aggregates
    # (percentile_cont, percentile_disc, mode): the order of the values in each group
    order: tuple[SortKey, ...] = ()
    param: Any = None                          # a percentile's fraction (None: NULL)


@dataclasses.dataclass(frozen=True)
class Aggregate(Node):
    """GROUP BY: one row per distinct value of `groups`, with `aggs` over its rows.
    With `sets` (GROUPING SETS / ROLLUP / CUBE), one such aggregation per grouping set -
    each set a tuple of indices into `groups` - their rows concatenated, the groups outside
    a row's set NULL. `grouping`: the GROUPING(...) calls, each an output key and the
    indices of its arguments in `groups`; its value is a bit per argument, the first
    argument's the highest, set where the argument is not in the row's grouping set (0
    everywhere without `sets`)."""
    input: Node
    groups: list[tuple[str, exp.Expression]]
    aggs: list[AggCall]
    sets: tuple[tuple[int, ...], ...] | None = None
    grouping: list[tuple[str, tuple[int, ...]]] = dataclasses.field(default_factory=list)

    def expressions(self):
        return [e for _, e in self.groups] + [a.arg for a in self.aggs if a.arg is not None] + \
            [k.expr for a in self.aggs for k in a.order]


@dataclasses.dataclass(frozen=True)
class WindowCall:
    key: str                                   # output key
    func: str                                  # row_number, rank, dense_rank, lag, lead,
                                               # first_value, sum, count, count_star, avg,
                                               # min, max
    args: list[exp.Expression]
    partition: list[exp.Expression]
    order: list["SortKey"]
    frame: str                                 # "partition" (whole), "range" (up to the
                                               # current row's last peer), "rows" (up to it)
    # a ROWS frame with offsets: (first, last) rows relative to the current one (-2: 2
    # PRECEDING, 0: CURRENT ROW, 1: 1 FOLLOWING; None: UNBOUNDED); frame is then "rows"
    rows: tuple[int | None, int | None] | None = None
    # a RANGE frame with offsets (frame "range"): (start, end), each (kind, offset) - kind
    # unbounded_preceding / preceding / current / following / unbounded_following, the
    # offset a constant (a number, or pa.MonthDayNano for an interval) or None
    range: tuple[tuple[str, Any], tuple[str, Any]] | None = None


@dataclasses.dataclass(frozen=True)
class Window(Node):
    """Window functions over the input's rows; output = input columns + one per call."""
    input: Node
    calls: list[WindowCall]

    def expressions(self):
        return [e for c in self.calls for e in c.args + c.partition + [k.expr for k in c.order]]


@dataclasses.dataclass(frozen=True)
class SortKey:
    expr: exp.Expression
    desc: bool = False
    nulls_first: bool | None = None            # None: PostgreSQL default (last for ASC)


@dataclasses.dataclass(frozen=True)
class Sort(Node):
    input: Node
    keys: list[SortKey]
    limit: int | None = None                   # top-N

    def expressions(self):
        return [k.expr for k in self.keys]


@dataclasses.dataclass(frozen=True)
class Limit(Node):
    input: Node
    limit: int | None
    offset: int = 0


@dataclasses.dataclass(frozen=True)
class Distinct(Node):
    input: Node


@dataclasses.dataclass(frozen=True)
class SetOp(Node):
    left: Node
    right: Node
    kind: str                                  # union, intersect, except
    all: bool
    keys: list[str] = dataclasses.field(default_factory=list)   # output keys


@dataclasses.dataclass(frozen=True)
class RecursiveUnion(Node):
    """WITH RECURSIVE's `anchor UNION [ALL] recursive`: the anchor's rows, then the
    recursive term run again and again over the rows the step before added (its WorkTable
    of the same `ref`) until a step adds none; UNION (not ALL) keeps only rows not seen
    before. Output: `keys`, typed as the anchor's columns."""
    anchor: Node
    recursive: Node
    all: bool
    ref: int
    keys: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Series(Node):
    """An arithmetic series made at run time, a batch at a time (numpy, never a row at a
    time): `start`, `start + step`, ... while not past `stop`, as `type` (an integer type,
    or timestamp[us] with the values in microseconds); with a second key, each row's
    ordinal 1, 2, ... (WITH ORDINALITY). generate_series in FROM, and the row numbers that
    set-returning functions in a SELECT list are joined with."""
    keys: list[str]
    start: int
    stop: int
    step: int
    type: Any = None                 # pa.DataType of the first column

    @property
    def count(self) -> int:
        return max(0, (self.stop - self.start) // self.step + 1)

    def label(self):
        return f"Series {self.count} row(s)"


@dataclasses.dataclass(frozen=True)
class WorkTable(Node):
    """In a recursive term: the rows the last step of RecursiveUnion `ref` added."""
    ref: int
    keys: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, eq=False)
class Output:
    """The root: a plan plus the user-visible column names of its (ordered) keys. `utc`:
    positions of columns that are `now()` / `current_timestamp` as written, returned as
    timestamp with time zone (UTC) as PostgreSQL types them (see planner.query.with_utc)."""
    plan: Node
    names: list[str]
    keys: list[str]
    utc: tuple[int, ...] = ()
    # (name, ViewMetadata) of the views expanded into the plan: planner.plan_cache keeps a
    # plan while each is still the catalog's
    views: tuple = ()


_INTERNAL = re.compile(r'"([^"#]+)#\d+\.([^"]+)"')


def _and_sql(parts: list[exp.Expression]) -> str:
    """A list of conjuncts for EXPLAIN: an OR among several is parenthesised, so that the
    text reads as the plan means (`a AND (b OR c)`, not `a AND b OR c`)."""
    if len(parts) == 1:
        return _sql(parts[0])
    return " AND ".join(f"({_sql(p)})" if isinstance(p, exp.Or) else _sql(p) for p in parts)


def _sql(e: exp.Expression) -> str:
    """An expression for EXPLAIN: internal keys `"alias#n.col"` shown as `alias.col`."""
    try:
        text = e.sql(dialect="postgres")
    except Exception:  # noqa: BLE001 - a node the generator cannot render: name its kind
        text = f"({e.key} expression)"           # never a Python repr in user-facing text
    return _INTERNAL.sub(r"\1.\2", text)


def explain_sql(e: exp.Expression) -> str:
    """An expression as EXPLAIN writes it (for details an operator adds at run time)."""
    return _sql(e)


def describe(node: Node) -> list[str]:
    """One line of details per node for EXPLAIN (beyond its label)."""
    out = []
    if isinstance(node, Scan):
        out.append("columns: " + ", ".join(node.columns))
        if node.pushed:
            out.append("pushed: " + " AND ".join(str(p) for p in node.pushed))
        if node.filters:
            out.append("filter: " + _and_sql(node.filters))
        if node.pruned is not None:
            out.append(f"tablets: {node.pruned[0]} of {node.pruned[1]}")
        if node.snapshot is not None:
            out.append("as of: " + _sql(node.snapshot))
    elif isinstance(node, Filter):
        out.append("condition: " + _sql(node.condition))
    elif isinstance(node, Project):
        out.append("items: " + ", ".join(f"{_sql(e)} AS {k}" for k, e in node.items))
    elif isinstance(node, MultiJoin):
        out.append("on: " + _and_sql(node.conditions))
    elif isinstance(node, Join):
        keys = ", ".join(f"{_sql(a)} = {_sql(b)}" for a, b in zip(node.left_keys,
                                                                    node.right_keys))
        out.append("keys: " + (keys or "(none)"))
        if node.residual is not None:
            out.append("residual: " + _sql(node.residual))
    elif isinstance(node, Aggregate):
        if node.groups:
            out.append("group by: " + ", ".join(_sql(e) for _, e in node.groups))
        if node.sets is not None:
            out.append("grouping sets: " + ", ".join(
                "(" + ", ".join(_sql(node.groups[i][1]) for i in s) + ")" for s in node.sets))
        out.append("aggregates: " + ", ".join(
            f"{a.func}({'' if a.param is None else f'{a.param}, '}"
            f"{'DISTINCT ' if a.distinct else ''}"
            f"{_sql(a.arg) if a.arg is not None else '*'}" + (" ORDER BY " + ", ".join(
                _sql(k.expr) + (" DESC" if k.desc else "") for k in a.order) if a.order
                else "") + ")" for a in node.aggs))
    elif isinstance(node, Window):
        for c in node.calls:
            part = ", ".join(_sql(e) for e in c.partition)
            order = ", ".join(_sql(k.expr) + (" DESC" if k.desc else "") for k in c.order)
            out.append(f"{c.func}({', '.join(_sql(a) for a in c.args)}) OVER ("
                       + (f"PARTITION BY {part} " if part else "")
                       + (f"ORDER BY {order} " if order else "")
                       + (f"[rows {_bound(c.rows[0])} .. {_bound(c.rows[1])}])" if c.rows
                          else f"[{c.frame}])"))
    elif isinstance(node, Sort):
        out.append("keys: " + ", ".join(_sql(k.expr) + (" DESC" if k.desc else "")
                                        for k in node.keys))
        if node.limit is not None:
            out.append(f"top-N: {node.limit}")
    elif isinstance(node, Limit):
        out.append(f"limit: {node.limit} offset: {node.offset}")
    elif isinstance(node, SetOp):
        out.append(f"{node.kind}{' ALL' if node.all else ''}")
    elif isinstance(node, RecursiveUnion):
        out.append(f"union{' ALL' if node.all else ''} until a step adds no rows "
                   f"(work table {node.ref})")
    elif isinstance(node, WorkTable):
        out.append(f"the rows the last step of work table {node.ref} added")
    return out


def with_children(node: Node, fn) -> Node:
    """`node` with each child `c` replaced by `fn(c)` (a new node when any child changed;
    `node` itself otherwise). Plan nodes are frozen: this is how a rewrite rebuilds a
    path of the tree."""
    changes = {}
    for name in _field_names(type(node)):
        v = getattr(node, name)
        if isinstance(v, Node):
            c = fn(v)
            if c is not v:
                changes[name] = c
        elif isinstance(v, list) and any(isinstance(c, Node) for c in v):
            new = [fn(c) if isinstance(c, Node) else c for c in v]
            if any(a is not b for a, b in zip(new, v)):
                changes[name] = new
    return dataclasses.replace(node, **changes) if changes else node


def walk(node: Node):
    """Pre-order traversal."""
    yield node
    for c in node.children():
        yield from walk(c)


# -- plan helpers: expressions over internal keys, and the plan-only expression nodes --------
# (shared by the binder, the rules and the executor)


class SubqueryRef(exp.Expression):
    """A scalar uncorrelated subquery: `this` is its `logical.Output`; the executor runs it
    once and substitutes the value."""
    arg_types = {"this": True}


class AvgOf(exp.Expression):
    """avg(x) as sum / count, with the result type of SQL's avg: DECIMAL for DECIMAL input
    (exact division), double otherwise. Evaluated by the executor."""
    arg_types = {"this": True, "expression": True}


def conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    if e is None:
        return []
    if isinstance(e, exp.Paren):
        return conjuncts(e.this)
    if isinstance(e, exp.And):
        return conjuncts(e.this) + conjuncts(e.expression)
    return [e]


def and_all(parts: list[exp.Expression]) -> exp.Expression | None:
    out = None
    for p in parts:
        out = p if out is None else exp.And(this=out, expression=p)
    return out


def keycol(key: str) -> exp.Column:
    return exp.Column(this=exp.Identifier(this=key, quoted=True))


def refs(e: exp.Expression) -> set[str]:
    """Internal keys an (already bound) expression reads."""
    return {c.name for c in e.find_all(exp.Column)}


def output_keys(node: Node) -> list[str]:
    """The internal keys a node produces, in order."""
    if isinstance(node, Scan):
        return [node.key(c) for c in node.columns] + (
            [node.key("is_deleted")] if node.changes else [])
    if isinstance(node, Values):
        return list(node.keys)
    if isinstance(node, (Filter, Sort, Limit, Distinct)):
        return output_keys(node.input)
    if isinstance(node, Project):
        return [k for k, _ in node.items]
    if isinstance(node, MultiJoin):
        return [k for i in node.inputs for k in output_keys(i)]
    if isinstance(node, Join):
        if node.kind in ("semi", "anti"):
            return output_keys(node.left)
        return output_keys(node.left) + output_keys(node.right)
    if isinstance(node, Aggregate):
        return [k for k, _ in node.groups] + [a.key for a in node.aggs] + \
            [k for k, _ in node.grouping]
    if isinstance(node, (SetOp, RecursiveUnion, WorkTable, Series)):
        return list(node.keys)
    if isinstance(node, Window):
        return output_keys(node.input) + [c.key for c in node.calls]
    raise TypeError(node)


def subquery_plans(node: Node):
    """Plans (`Output`s) of the scalar subqueries referenced by the node's expressions."""
    for e in node.expressions():
        for s in e.find_all(SubqueryRef):
            yield s.this


def all_nodes(root: Node):
    """Every node under `root`, pre-order, including the nodes of the scalar subqueries
    (SubqueryRef) its expressions reference."""
    for n in walk(root):
        yield n
        for sub in subquery_plans(n):
            yield from all_nodes(sub.plan)


def map_expressions(node: Node, fn) -> Node:
    """`node` with `fn` applied to every expression it holds (a new node: plan nodes are
    frozen; its children stay as they are)."""
    R = dataclasses.replace
    if isinstance(node, Scan):
        return R(node, filters=[fn(f) for f in node.filters],
                 snapshot=fn(node.snapshot) if node.snapshot is not None else None,
                 changes=(fn(node.changes[0]), fn(node.changes[1])) if node.changes
                 else node.changes)
    if isinstance(node, Values):
        return R(node, rows=[[fn(e) for e in r] for r in node.rows])
    if isinstance(node, Filter):
        return R(node, condition=fn(node.condition))
    if isinstance(node, Project):
        return R(node, items=[(k, fn(e)) for k, e in node.items])
    if isinstance(node, MultiJoin):
        return R(node, conditions=[fn(c) for c in node.conditions])
    if isinstance(node, Join):
        return R(node, left_keys=[fn(e) for e in node.left_keys],
                 right_keys=[fn(e) for e in node.right_keys],
                 residual=fn(node.residual) if node.residual is not None else None)
    if isinstance(node, Aggregate):
        return R(node, groups=[(k, fn(e)) for k, e in node.groups],
                 aggs=[R(a, arg=fn(a.arg), order=tuple(R(k, expr=fn(k.expr)) for k in a.order))
                       if a.arg is not None else a for a in node.aggs])
    if isinstance(node, Sort):
        return R(node, keys=[R(k, expr=fn(k.expr)) for k in node.keys])
    if isinstance(node, Window):
        return R(node, calls=[R(c, args=[fn(e) for e in c.args],
                                partition=[fn(e) for e in c.partition],
                                order=[R(k, expr=fn(k.expr)) for k in c.order])
                              for c in node.calls])
    return node


def subquery_refs(node: Node) -> list[SubqueryRef]:
    """The SubqueryRef expressions in the node's own expressions."""
    return [s for e in node.expressions() for s in e.find_all(SubqueryRef)]


def with_subquery_plans(node: Node, fn) -> Node:
    """`node` with the plan of each scalar subquery its expressions reference replaced by
    `fn(plan)`. The expressions holding a SubqueryRef are copied first (a new SubqueryRef
    pointing at a new Output): the node's input plan shares them, and it may be the bound
    plan the plan cache keeps, which no stage may edit."""
    if not subquery_refs(node):
        return node

    def repoint(e: exp.Expression) -> exp.Expression:
        if e.find(SubqueryRef) is None:
            return e
        e = e.copy()            # sqlglot copies the tree; the Output in `this` is shared
        for ref in e.find_all(SubqueryRef):
            ref.set("this", dataclasses.replace(ref.this, plan=fn(ref.this.plan)))
        return e
    return map_expressions(node, repoint)


def rewrite_nodes(out: Output, fn) -> Output:
    """`out` with every node rebuilt bottom-up as `fn(node with rebuilt children)`, in the
    plans of the scalar subqueries its expressions reference too (`with_subquery_plans`:
    the SubqueryRefs of the new plan are new, those of `out` untouched)."""
    def visit(node: Node) -> Node:
        return with_subquery_plans(fn(with_children(node, visit)), visit)
    return dataclasses.replace(out, plan=visit(out.plan))


def _bound(offset: int | None) -> str:
    """A ROWS frame bound for EXPLAIN: -2 is `2 preceding`, None `unbounded`."""
    if offset is None:
        return "unbounded"
    if offset == 0:
        return "current row"
    return f"{abs(offset)} {'preceding' if offset < 0 else 'following'}"
