"""Binder: a parsed query (sqlglot AST) -> a logical plan (`planner.logical`) over the catalog.

    sql --parse--> AST --check tables--> --sqlglot qualify--> qualified AST --Binder--> Output

- Tables are checked against the catalog first (42P01 with the name's position); sqlglot's
  `qualify` then expands `*`, resolves every column to its source alias and rejects unknown
  (42703) or ambiguous (42702) columns.
- Each FROM source becomes a relation with a fresh internal prefix (`alias#n`), so the same
  alias used in a subquery and its outer query never collide (TPC-H Q17, Q21).
- Subqueries are decorrelated here, by shape:
    EXISTS / NOT EXISTS (sel)      -> semi / anti join; correlated equalities become keys, other
                                      correlated conjuncts the join's residual condition
    x IN (sel) / x NOT IN (sel)    -> semi / null-aware anti join on x = sel's column
    scalar, uncorrelated           -> `logical.SubqueryRef`, run once by the executor (an
                                      init plan)
    scalar, correlated by equality -> the subquery grouped by its correlated columns and
                                      left-joined, the expression replaced by the result column
  Other shapes - correlation by non-equalities or outside the WHERE, no aggregate,
  subqueries in other positions, EXISTS and ARRAY(subquery) inside expressions, correlated
  EXISTS with GROUP BY / aggregates / LIMIT - become SubPlans (planner.expr.SubPlan): the
  subquery is bound and run once per distinct tuple of the outer values it reads, as
  PostgreSQL's SubPlan does. `x IN (sel)` where it cannot be a join (an OR, a CASE, the
  SELECT list, correlated NOT IN, a correlated set operation) is an InSubPlan: the set is
  such a SubPlan's rows, tested against x with SQL's NULL logic.
  A correlated scalar aggregate joined by its groups gets, where no group matched, the
  aggregates' value over no rows (count 0), not NULL.
- Before qualify: parenthesised joins in FROM are flattened (`flatten_paren_joins`),
  `agg(x) FILTER (WHERE c)` becomes `agg(CASE WHEN c THEN x END)`, and unaliased scalar
  subqueries in the SELECT list get qualify's `_col_<i>` alias (ORDER BY 2 naming one made
  qualify fail an assertion). In FROM, a comma binds looser than JOIN: an outer join's left
  side is what follows the last comma. array_agg / string_agg (with ORDER BY, DISTINCT) are
  aggregate calls computed from one sort (planner/executor/aggregates.py). Set-returning functions in FROM (constant arguments) become VALUES lists, in
  the SELECT list a join with row numbers. Functions and reg* casts a catalog wrapper
  provides (`catalog.function(name)`, wire.pg_catalog) are bound as HostCalls.
- Aggregates are collected from SELECT, HAVING and ORDER BY; avg(x) is planned as
  sum(x) / count(x) so DECIMAL keeps its exactness (and double for integers and floats).
  percentile_cont / percentile_disc / mode() WITHIN GROUP are aggregate calls on the same
  sort path as array_agg. ROLLUP / CUBE / GROUPING SETS become one Aggregate with its
  grouping sets (aggregates.grouping_sets), GROUPING(...) an output column of it.
- A WITH RECURSIVE query that reads itself binds as a RecursiveUnion (bind.recursive_cte):
  the anchor, and the recursive term with its self-reference a WorkTable.
- The binder never executes: where it needs rows (a SubPlan's, run per outer value while the
  statement executes; the length of a set-returning function's series in the SELECT list)
  it hands a bound plan to the `SubqueryRunner` the statement layer injected
  (planner.query.subquery_runner).

The package, each module importing only those above it:

    common        Scope, `position` (an AST node's offset in the statement), output names,
                  the SubqueryRunner protocol
    pg_functions  set-returning functions (FROM, SELECT list), HostCalls for the functions
                  and reg* casts a catalog provides, PostgreSQL rewrites   (PgFunctionBinding)
    aggregates    GROUP BY, aggregates, HAVING, windows, ORDER BY / DISTINCT / LIMIT of a
                  SELECT, FILTER clauses                                   (AggregateBinding)
    decorrelate   EXISTS / IN / scalar subqueries: joins, SubqueryRefs, SubPlans
                                                                             (SubqueryBinding)
    bind          `Binder`: qualify, FROM / WHERE, joins, set operations, VALUES,
                  expressions and column resolution; the mixins above complete it
"""

from __future__ import annotations

from planner.binder.bind import Binder
from planner.binder.common import SubqueryRunner, output_name, position

__all__ = ["Binder", "SubqueryRunner", "output_name", "position"]
