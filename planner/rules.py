"""Named optimizer rules over the logical plan, applied in order by `optimize`.

    fold_constants        constant subexpressions evaluated once (planner.expr)
    factor_or             (A AND B) OR (A AND C) -> A AND (B OR C): exposes join keys that
                          queries repeat in every OR branch (TPC-H Q19)
    pushdown_predicates   WHERE/ON conjuncts moved to the lowest node that has their columns:
                          into scans, into the inputs of inner joins, to the preserved side of
                          outer/semi/anti joins, through projections; and, as part of the
                          same rule (not one of its own), for an OR spanning several join
                          inputs each input gets the implied OR of its own conjuncts as an
                          extra filter (Q7's nation names, Q19)
    fold_pushed_predicates  constant folding again, over the predicates pushdown combined
                          and moved (scan filters, filter and join conditions)
    scan_predicates       scan filters of the form column <op> constant, BETWEEN, IN, IS [NOT]
                          NULL become engine ColumnPredicates: tablets pruned by partition,
                          rowsets and pages skipped by key range and zone maps, lazy
                          materialization; partition pruning is recorded for EXPLAIN
    prune_columns         scans read only the columns something above them uses

Plan nodes are frozen: a rule returns a new plan (`dataclasses.replace` from a changed
node up to the root; unchanged subtrees are shared), never edits one in place, nor the
sqlglot expressions the new plan shares with it (a scalar subquery's SubqueryRef is
re-pointed on a copy: logical.with_subquery_plans). `RULES` is
a tuple of `Rule(name, apply)` in that order. Every rule can be switched off by
name (`optimize(..., disabled=...)`, the `disabled_rules` context manager, or `SET
kudusql.disabled_rules = 'name, ...'` in a session): a plan must give the same rows with
any subset of the rules, which tests/sql/fuzz checks; what each rule does to a plan is
pinned by EXPLAIN golden files, with the rule on and off (tests/planner/test_rule_golden.py).

Join ordering is not a rule here: the executor's MultiJoin orders joins greedily from the
true sizes and key cardinalities of its inputs once they are scanned and filtered (see
planner/executor/joins.py), which is both simpler and better informed than estimates.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

from sqlglot import exp

from engine.tablet.scan_spec import ColumnPredicate
from planner import logical as L
from planner.logical import all_nodes as _all_nodes
from planner.logical import map_expressions as _map_exprs
from planner.logical import rewrite_nodes as _rewrite_nodes
from planner.logical import SubqueryRef, and_all, conjuncts, output_keys, refs
from planner.expr import coerce_literal_to, constant_value, fold_constants


# -- fold_constants ------------------------------------------------------------------------
def rule_fold_constants(out: L.Output, catalog) -> L.Output:
    return _rewrite_nodes(out, lambda n: _map_exprs(n, fold_constants))


# -- fold_pushed_predicates ----------------------------------------------------------------
_PREDICATE_NODES = (L.Scan, L.Filter, L.MultiJoin, L.Join)


def rule_fold_pushed_predicates(out: L.Output, catalog) -> L.Output:
    """fold_constants again where pushdown_predicates put predicates (scan filters, filter
    and join conditions): a conjunct pushed through a projection may have become constant
    (`WHERE g.two > 1` over `SELECT 2 AS two` is `2 > 1` at the scan)."""
    return _rewrite_nodes(out, lambda n: _map_exprs(n, fold_constants)
                          if isinstance(n, _PREDICATE_NODES) else n)


# -- factor_or -----------------------------------------------------------------------------
def _disjuncts(e: exp.Expression) -> list[exp.Expression]:
    if isinstance(e, exp.Paren):
        return _disjuncts(e.this)
    if isinstance(e, exp.Or):
        return _disjuncts(e.this) + _disjuncts(e.expression)
    return [e]


def _or_all(parts):
    out = None
    for p in parts:
        out = p if out is None else exp.Or(this=out, expression=p)
    return out


def factor_or(e: exp.Expression) -> list[exp.Expression]:
    """An OR whose branches share conjuncts -> [shared..., OR of the rests]."""
    branches = _disjuncts(e)
    if len(branches) < 2:
        return [e]
    sets = [conjuncts(b) for b in branches]
    common = [c for c in sets[0] if all(any(c == d for d in s) for s in sets[1:])]
    if not common:
        return [e]
    rests = []
    for s in sets:
        rest = [c for c in s if not any(c == d for d in common)]
        if not rest:            # one branch is just the common part: the OR is true
            return common
        rests.append(exp.Paren(this=and_all(rest)))
    return common + [_or_all(rests)]


def rule_factor_or(out: L.Output, catalog) -> L.Output:
    def fix(node):
        if isinstance(node, L.Filter):
            parts = [p for c in conjuncts(node.condition) for p in factor_or(c)]
            return dataclasses.replace(node, condition=and_all(parts))
        if isinstance(node, L.MultiJoin):
            return dataclasses.replace(
                node, conditions=[p for c in node.conditions for p in factor_or(c)])
        if isinstance(node, L.Scan):
            return dataclasses.replace(
                node, filters=[p for c in node.filters for p in factor_or(c)])
        return node
    return _rewrite_nodes(out, fix)


# -- pushdown_predicates -------------------------------------------------------------------
def _deterministic(e: exp.Expression) -> bool:
    return e.find(exp.Rand, exp.AggFunc, SubqueryRef) is None


def push(node: L.Node, preds: list[exp.Expression]) -> L.Node:
    """Apply `preds` (conjuncts over node's output) as low in `node` as possible."""
    if isinstance(node, L.Scan):
        return dataclasses.replace(node, filters=node.filters + preds) if preds else node
    if isinstance(node, L.Filter):
        return push(node.input, conjuncts(node.condition) + preds)
    if isinstance(node, L.MultiJoin):
        conds = node.conditions + preds
        owned: list[list[exp.Expression]] = [[] for _ in node.inputs]
        keysets = [set(output_keys(i)) for i in node.inputs]
        keep = []
        for c in conds:
            r = refs(c)
            for i, ks in enumerate(keysets):
                if r <= ks and _deterministic(c):
                    owned[i].append(c)
                    break
            else:
                keep.append(c)
        for c in keep:                              # derive_or_predicates
            if isinstance(c, (exp.Or, exp.Paren)):
                for i, ks in enumerate(keysets):
                    implied = _implied(c, ks)
                    if implied is not None:
                        owned[i].append(implied)
        inputs = [push(inp, o) for inp, o in zip(node.inputs, owned)]
        if len(inputs) == 1 and not keep:
            return inputs[0]
        return dataclasses.replace(node, inputs=inputs, conditions=keep)
    if isinstance(node, L.Join):
        left_keys = set(output_keys(node.left))
        down, stay = [], []
        for c in preds:
            (down if refs(c) <= left_keys and node.kind != "full" and _deterministic(c)
             else stay).append(c)
        node = dataclasses.replace(node, left=push(node.left, down),
                                   right=push(node.right, []))
        return L.Filter(node, and_all(stay)) if stay else node
    if isinstance(node, L.Project):
        mapping = {k: e for k, e in node.items}
        return _push_through(node, preds, mapping, lambda c: all(
            k in mapping and _deterministic(mapping[k]) for k in refs(c)))
    if isinstance(node, L.Aggregate):
        # with grouping sets a group key is NULL in the rows of the sets without it, and a
        # filter below would change the other sets' totals: only keys in every set move
        fixed = set(range(len(node.groups))) if node.sets is None else \
            set.intersection(*map(set, node.sets))
        gmap = {k: e for i, (k, e) in enumerate(node.groups) if i in fixed}
        return _push_through(node, preds, gmap, lambda c: bool(
            refs(c) and refs(c) <= set(gmap) and _deterministic(c)))
    # Sort, Limit, Distinct, SetOp, Values: recurse, keep preds above.
    node = L.with_children(node, lambda child: push(child, []))
    return L.Filter(node, and_all(preds)) if preds else node


def _push_through(node, preds, mapping: dict, movable) -> L.Node:
    """Push the `movable` predicates below a Project / Aggregate, rewritten over its input
    (each output key replaced by the expression that computes it); the rest stay above."""
    down, stay = [], []
    for c in preds:
        if movable(c):
            down.append(c.transform(
                lambda n: mapping[n.name].copy() if isinstance(n, exp.Column)
                and n.name in mapping else n))
        else:
            stay.append(c)
    node = dataclasses.replace(node, input=push(node.input, down))
    return L.Filter(node, and_all(stay)) if stay else node


def _implied(c: exp.Expression, keys: set[str]) -> exp.Expression | None:
    """For OR `c`, the OR of each branch's conjuncts over `keys` alone (None if a branch
    has none, i.e. nothing is implied)."""
    parts = []
    for b in _disjuncts(c):
        mine = [x for x in conjuncts(b) if refs(x) and refs(x) <= keys]
        if not mine:
            return None
        parts.append(exp.Paren(this=and_all(mine)))
    return _or_all(parts) if len(parts) > 1 else None


def _pushed(plan: L.Node) -> L.Node:
    """`push` over `plan` and over the plan of every scalar subquery in it (new
    SubqueryRefs: the input plan's are left as they were)."""
    def visit(node: L.Node) -> L.Node:
        return L.with_subquery_plans(L.with_children(node, visit), _pushed)
    return visit(push(plan, []))


def rule_pushdown_predicates(out: L.Output, catalog) -> L.Output:
    return dataclasses.replace(out, plan=_pushed(out.plan))


# -- scan_predicates -----------------------------------------------------------------------
_FLIP = {exp.LT: exp.GT, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.GTE: exp.LTE, exp.EQ: exp.EQ}


def _scan_column(scan: L.Scan, e: exp.Expression) -> str | None:
    if isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.Column) and e.name.startswith(scan.prefix + "."):
        col = e.name[len(scan.prefix) + 1:]
        return col if col in scan.columns else None
    return None


def to_column_predicate(scan: L.Scan, c: exp.Expression, types: dict) -> ColumnPredicate | None:
    def val(e, col):
        ok, _, _ = constant_value(e)
        if not ok:
            return None
        k = coerce_literal_to(e, types[col])
        if k is None:
            return None
        v = k.this
        return None if not v.is_valid else v.as_py()

    if type(c) in _FLIP:
        a, b, op = c.this, c.expression, type(c)
        col = _scan_column(scan, a)
        if col is None:
            col, a, b, op = _scan_column(scan, b), b, a, _FLIP[op]
        if col is None:
            return None
        v = val(b, col)
        if v is None:
            return None
        return {exp.EQ: ColumnPredicate.equal, exp.LT: ColumnPredicate.less,
                exp.LTE: ColumnPredicate.less_equal, exp.GT: ColumnPredicate.greater,
                exp.GTE: ColumnPredicate.greater_equal}[op](col, v)
    if isinstance(c, exp.Between):
        col = _scan_column(scan, c.this)
        if col is None:
            return None
        lo, hi = val(c.args["low"], col), val(c.args["high"], col)
        if lo is None or hi is None:
            return None
        return ColumnPredicate.range(col, lo, hi, True, True)
    if isinstance(c, exp.In) and not c.args.get("query"):
        col = _scan_column(scan, c.this)
        if col is None:
            return None
        vals = [val(e, col) for e in c.expressions]
        if any(v is None for v in vals):
            return None
        if any(isinstance(v, float) and v == 0 for v in vals):
            return None     # the engine's IN is a hash lookup, where -0.0 is not 0.0
        return ColumnPredicate.in_list(col, vals)
    test = null_test(c)
    if test is not None:
        col = _scan_column(scan, test[0])
        if col is None:
            return None
        return ColumnPredicate.is_null(col) if test[1] else ColumnPredicate.is_not_null(col)
    return None


def null_test(c: exp.Expression) -> tuple[exp.Expression, bool] | None:
    """`x IS NULL` -> (x, True), `x IS NOT NULL` -> (x, False), else None.

    sqlglot 30 parses `x IS NOT NULL` as `Is(x, Null, negate=True)` (older versions, and
    trees built by hand, have `Not(Is(x, Null))`); both shapes, any parentheses and any
    number of NOTs around them are read here, so the pushed predicate keeps its sense."""
    positive = True
    while True:
        if isinstance(c, exp.Paren):
            c = c.this
        elif isinstance(c, exp.Not):
            positive, c = not positive, c.this
        else:
            break
    if not (isinstance(c, exp.Is) and isinstance(c.expression, exp.Null)):
        return None
    if c.args.get("negate"):
        positive = not positive
    return c.this, positive


def rule_scan_predicates(out: L.Output, catalog) -> L.Output:
    def scan(n: L.Node) -> L.Node:
        if not isinstance(n, L.Scan) or n.changes:
            return n
        table = catalog.table(n.table)
        if getattr(table, "virtual", False):      # system views: filters stay residual
            return n
        types = {c.name: c.arrow_type for c in table.schema.columns}
        rest, pushed = [], list(n.pushed)
        for f in n.filters:
            p = to_column_predicate(n, f, types)
            if p is None:
                rest.append(f)
            else:
                pushed.append(p)
        return dataclasses.replace(n, filters=rest, pushed=pushed, pruned=(
            len(table.prune(pushed)), len(table.partition_schema.partitions)))
    return _rewrite_nodes(out, scan)


# -- prune_columns -------------------------------------------------------------------------
def rule_prune_columns(out: L.Output, catalog) -> L.Output:
    used = set(out.keys)
    for n in _all_nodes(out.plan):
        for e in n.expressions():
            used |= refs(e)
        if isinstance(n, L.Project):
            pass
        if isinstance(n, L.SetOp):
            used |= set(output_keys(n.left)) | set(output_keys(n.right))
        if isinstance(n, L.RecursiveUnion):       # its inputs' columns meet by position
            used |= set(output_keys(n.anchor)) | set(output_keys(n.recursive))
        if isinstance(n, L.Distinct):
            used |= set(output_keys(n.input))
    return _rewrite_nodes(out, lambda n: dataclasses.replace(
        n, columns=[c for c in n.columns if n.key(c) in used]) if isinstance(n, L.Scan) else n)


class Rule(NamedTuple):
    """One optimizer rule: its name (what `disabled` and `SET kudusql.disabled_rules` use)
    and the function that rewrites a plan with it."""
    name: str
    apply: Callable[[L.Output, Any], L.Output]


# The rules in the order `optimize` applies them; each name is one entry (disabling a name
# skips exactly that rule: tests/planner/test_rule_golden.py checks the names are unique).
RULES: tuple[Rule, ...] = (
    Rule("fold_constants", rule_fold_constants),
    Rule("factor_or", rule_factor_or),
    Rule("pushdown_predicates", rule_pushdown_predicates),
    Rule("fold_pushed_predicates", rule_fold_pushed_predicates),
    Rule("scan_predicates", rule_scan_predicates),
    Rule("prune_columns", rule_prune_columns),
)


RULE_NAMES = tuple(r.name for r in RULES)

# Rules switched off by name for the current thread / task (`disabled_rules`). Each rule is
# an optimisation only: a plan is correct with any subset of them, which the metamorphic
# fuzzer (tests/sql/fuzz) checks by comparing results with each rule disabled in turn.
_DISABLED: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "kudusql_disabled_rules", default=frozenset())


def check_rule_names(names) -> frozenset[str]:
    """`names` as a frozenset, 22023 for a name that is not a rule."""
    names = frozenset(n.strip().lower() for n in names if n.strip())
    unknown = sorted(names - set(RULE_NAMES))
    if unknown:
        from planner.errors import InvalidParameterValue
        raise InvalidParameterValue(f"unknown optimizer rule: {', '.join(unknown)} (rules: "
                                    f"{', '.join(RULE_NAMES)})")
    return names


@contextlib.contextmanager
def disabled_rules(names):
    """Within the block, `optimize` skips the rules named in `names` (see RULE_NAMES):
        with disabled_rules({"scan_predicates"}): ...   # no predicate reaches the engine
    Sessions use this for `SET kudusql.disabled_rules = 'a, b'`."""
    token = _DISABLED.set(check_rule_names(names))
    try:
        yield
    finally:
        _DISABLED.reset(token)


def optimize(out: L.Output, catalog, disabled: frozenset[str] | None = None) -> L.Output:
    """Run RULES in order over `out`, except those in `disabled` (default: the ones
    `disabled_rules` switched off)."""
    skip = _DISABLED.get() if disabled is None else disabled
    for rule in RULES:
        if rule.name not in skip:
            out = rule.apply(out, catalog)
    return out


__all__ = ["RULES", "RULE_NAMES", "Rule", "check_rule_names", "disabled_rules", "factor_or",
           "optimize", "output_keys", "push"]
