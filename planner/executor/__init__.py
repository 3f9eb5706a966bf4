"""Physical execution of a logical plan over Arrow: every operator consumes and produces
`pyarrow.Table`s (scans stream RecordBatches from the tablets, filtered batch by batch).

Operators and the kernels they use:
  Scan        engine `Table.scan` (tablets pruned, scanned in parallel at one snapshot, engine
              predicates, lazy materialization) + residual filters per batch; the columns
              only those filters read are dropped as they filter (`_scan_kept`)
  Filter      `planner.expr.evaluate_filter` + `Table.filter`
  Project     `planner.expr.evaluate`
  MultiJoin   inputs run one at a time, the next the one estimated smallest once scaled by
              the selectivity of the inputs already run that join it; each input's scan is
              thinned as its batches arrive by runtime filters (`runtime_filters`: bitmaps
              of the join keys of the inputs run before it, along chains of equal columns),
              so rows that cannot join are never held whole, hashed or joined. Then
              greedy operator ordering (GOO): repeatedly join the two connected inputs whose
              estimated result is smallest, estimating |A|*|B| / max(ndv_A(keys), ndv_B(keys))
              from the actual inputs (their row counts and distinct key counts); the smaller
              side is the hash table's build side (Acero hash join)
  Join        Acero hash join (left outer, full outer, left semi, left anti; streamed, it
              writes only the columns read above it, never its copies of the keys); the left side
              runs first and its keys filter the right side's scans (through projections,
              filters, GROUP BY keys and inner joins: `joins.trace_key`), except for NOT IN;
              a semi join whose subquery is estimated smaller runs it first and filters the
              left side's scans by its keys instead (TPC-H Q18); a residual
              condition is applied on the inner join of the two sides and mapped back to the
              left rows by row number, except a semi / anti join's lone `y <> x` of
              integer-like columns, tested against each key's min and max of y (TPC-H
              Q21); NOT IN is a null-aware anti join
  Aggregate   Acero hash aggregation (`Table.group_by`), or whole-column kernels without
              GROUP BY; sums of exact DECIMAL expressions on unscaled int64 (`scaled`);
              calls repeated within one aggregation computed once; text GROUP BY keys of
              at most 7 bytes as int64 codes (`kernels.pack_short`, off by default) and count(x)
              over x's validity only; where the first morsel's keys come in runs (a
              scan of a table keyed by them: lineitem by l_orderkey, TPC-H Q18), each
              morsel's runs are summed and counted first and the hash aggregation sums
              those partials (`_run_partials`; streamed with one integer key, summed
              by sorting instead: `_sorted_sums`); a scan-fed aggregation's morsels are
              prepared on the scan's pool threads (`PrepareInScan`, through
              `Executor.stream_batches`' `post`); an aggregation that occurs twice in the statement (a WITH query read twice,
              TPC-H Q15) runs once and its result is reused (`shared`)
  Sort        `pc.sort_indices` (NULLS LAST for ASC, FIRST for DESC, as PostgreSQL) and
              top-N by slicing the sorted indices
  Limit, Distinct, SetOp, Values

Every query can be stopped (planner/guard.py): operators work in morsels of at most
`guard.MORSEL_ROWS` rows and consult the statement's `QueryGuard` between two of them -
expression evaluation, Filter and Project over large inputs; Aggregate, Distinct, UNION's
DISTINCT and hash joins (build and probe) run as Acero plans fed by `_source`, a generator of
morsels that checks the guard inside the plan; cross joins check per chunk, top-N per morsel,
scans per batch. The guard also meters the Arrow data the statement holds (each operator's
result while its parent runs, plus what an operator accumulates) and fails the statement
with 53200 past `query_mem_limit`. Full sorts and windows sort by a sample sort on the first
key (`Executor.sort_indices`: numeric/temporal first keys; other types, one kernel call).

Every operator records rows out and wall time (EXPLAIN ANALYZE); scans also record the
engine's scan statistics (rows scanned, blocks skipped by zone maps and by lazy
materialization, cells never decoded).

The package, each module importing only those above it:

    kernels      NodeStats, empty_rows, common subexpressions, sizes, hash_key, short text
                 keys as int64 codes (pack_short / unpack_short), validity_only
    runtime_filters  RuntimeFilter: join-key membership applied to scan batches
    scaled       exact DECIMAL sums on unscaled int64 (Tree, Budget, single / split, widen /
                 combine, Fallback)
    shared       repeated aggregations of a statement, run once (fingerprint, Shared)
    joins        Join, MultiJoin, cross joins                      (JoinOperators)
    sort         Sort, top-N, Distinct, set operations             (SortOperators)
    aggregates   Aggregate, Window                                 (AggregateOperators)
    core         `Executor`: run / stream a plan, expressions, Scan, Values, Filter, Project,
                 Limit, scalar subqueries; the operator families above are its parts
                 (`ex.joins`, `ex.sorts`, `ex.aggregates`: objects over the executor's
                 public members, not mixins); `OPERATORS`, the table of which part's
                 `run_<node>` method runs each plan node
"""

from __future__ import annotations

from planner.executor.core import OPERATORS, Executor
from planner.executor.joins import cross_join, hash_join
from planner.executor.kernels import as_chunked, empty_rows
from planner.executor.sort import add_sort_key, distinct

# as_chunked (planner.point_read) and add_sort_key (tests/planner/test_guard.py) are reached
# here too
__all__ = ["OPERATORS", "Executor", "add_sort_key", "as_chunked", "cross_join", "distinct",
           "empty_rows", "hash_join"]
