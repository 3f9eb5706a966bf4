"""The `Executor`: runs (`run_output`) or streams (`stream_output`) a logical plan over the
catalog, dispatching on node type through `OPERATORS` (node class -> the part of the executor
that runs it and its `run_<node>` method, at the end of this file); evaluates expressions in morsels under the statement's QueryGuard; runs Scan (engine scans, residual filters, point lookups), Values, Series
(generate_series, made and streamed a morsel at a time), Filter,
Project and Limit itself, and scalar subqueries once (`SubqueryRef`). Joins, sorting / set
operations and aggregation / windows are its parts `joins`, `sorts` and `aggregates`:
objects of their own that use only the executor's public members (the package docstring).
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa
from sqlglot import exp

from engine import clock as _clock
from engine.tablet.scan_spec import ColumnPredicate
from planner import logical as L
from planner.logical import AvgOf, SubqueryRef, and_all, output_keys, refs
from planner.logical import all_nodes as _all_nodes
from planner.errors import SqlError
from planner import guard as _guard
from planner.expr import Const, IntegerAvg, evaluate, evaluate_filter
from planner.expr.subplans import HostCall, InSubPlan, SubPlan
from planner.guard import QueryGuard
from planner.executor.kernels import (
    array_nbytes,
    as_chunked,
    concat_tables,
    empty_rows,
    slice_rows,
    join_parts,
    NodeStats,
    table_nbytes,
)
from planner.executor.joins import JoinOperators
from planner.executor import runtime_filters
from planner.executor.shared import Shared
from planner.executor.sort import SortOperators, concat_promote
from planner.executor.aggregates import AggregateOperators, decimal_digits_needed


def served_by(per_tablet: dict) -> list[str]:
    """EXPLAIN ANALYZE lines naming the tablet servers a cluster scan read, each with the
    tablets it served (tablet ids shortened to 8 characters); none in embedded mode."""
    by: dict[str, list[str]] = {}
    for tid, s in per_tablet.items():
        for srv in getattr(s, "servers", ()):
            by.setdefault(srv, []).append(tid[:8])
    out = []
    for srv, tids in sorted(by.items(), key=lambda x: x[0].partition("@")[2]):
        uuid, _, addr = srv.partition("@")
        out.append(f"served by tserver {uuid[:8]} at {addr}: {len(tids)} tablet"
                   f"{'s' if len(tids) != 1 else ''} ({', '.join(sorted(tids))})")
    return out


class _ChunkFilter:
    """A scan's residual WHERE over a chunk of its engine batches (`TableScan.filter_chunks`:
    run on the pool thread that read them): the batches renamed to the scan's internal
    keys, then (`cond` None: no filter, renamed only) filtered a morsel at a time, only
    the columns at `kept` (positions in `keys`: the ones read above the scan) copied into
    the rows kept; only batches with rows are kept. `cond` is prepared already (no scalar subquery left to run) and runs no
    subplan or host function, so a call touches no executor state, waits on no scan, and
    may run on any thread."""

    __slots__ = ("keys", "cond", "kept")

    def __init__(self, keys: list[str], cond: exp.Expression, kept: list[int] | None = None):
        self.keys, self.cond, self.kept = keys, cond, kept

    def __call__(self, batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        named = [pa.RecordBatch.from_arrays(b.columns, names=self.keys)
                 for b in batches if b.num_rows]
        if not named or self.cond is None:
            return named
        t = pa.Table.from_batches(named)
        out = []
        for start in range(0, t.num_rows, _guard.MORSEL_ROWS):
            m = slice_rows(t, start, _guard.MORSEL_ROWS)
            mask = evaluate_filter(self.cond, m)
            if self.kept is not None:
                m = m.select(self.kept)
            m = m.filter(mask)
            out.extend(b for b in m.to_batches() if b.num_rows)
        return out


def _point_key(node: L.Scan, table) -> tuple | None:
    """The primary key a scan pins with equalities on every key column (and nothing else to
    check), or None."""
    if node.filters or node.changes:
        return None
    key_names = table.schema.key_names
    if len(node.pushed) != len(key_names):
        return None
    values = {}
    for p in node.pushed:
        if p.kind != "range" or p.lower is None or p.lower != p.upper or \
                not (p.lower_inclusive and p.upper_inclusive) or p.column in values:
            return None
        values[p.column] = p.lower
    if set(values) != set(key_names):
        return None
    return tuple(values[k] for k in key_names)


class Executor:
    def __init__(self, catalog, *, analyze: bool = False, check_cancel=None,
                 schema_only: bool = False, snapshot: int | None = None):
        """`schema_only`: scans return no rows (Describe learns result types cheaply).
        `snapshot`: the timestamp every scan without its own AS OF reads at (UPDATE /
        DELETE's row-matching query: planner/dml.py, the read its writes' preconditions
        name); None: each scan the latest state."""
        self.catalog = catalog
        self.snapshot = snapshot
        self.analyze = analyze
        self.schema_only = schema_only
        self.stats: dict[int, NodeStats] = {}
        self.subquery_values: dict[int, Const] = {}
        self.guard = QueryGuard.of(check_cancel)     # cancel + memory (planner/guard.py)
        self.check_cancel = self.guard
        self.needed: dict[int, set[str]] = {}
        self.prefilter: dict[int, tuple] = {}
        # runtime join filters on a scan's batches, by id(Scan) (executor/runtime_filters)
        self.runtime_filters: dict[int, list] = {}
        self.table_rows: dict[str, float] = {}
        # repeated aggregations computed once (executor/shared.py); a scalar subquery's
        # executor shares its parent's
        self.shared: Shared | None = None
        self.root: L.Output | None = None
        # WITH RECURSIVE: each RecursiveUnion's last step, which its WorkTable reads
        self.work_tables: dict[int, pa.Table] = {}
        # the operator families, each its own object over this executor's public members
        self.joins = JoinOperators(self)
        self.sorts = SortOperators(self)
        self.aggregates = AggregateOperators(self)
        # OPERATORS' part names -> the object whose method runs the node
        self.parts = {"core": self, "joins": self.joins, "sorts": self.sorts,
                      "aggregates": self.aggregates}

    # -- entry -----------------------------------------------------------------------------
    def run_output(self, out: L.Output) -> pa.Table:
        self.root = out
        if self.shared is None:
            self.shared = Shared()
            if not self.schema_only:
                self.shared.plan(out.plan)
        t = self.run(out.plan)
        cols = [t.column(k) for k in out.keys]
        return pa.Table.from_arrays(cols, names=list(out.names)) if cols else t

    def run(self, node: L.Node) -> pa.Table:
        self.guard.check()
        held = self.guard.held
        t0 = time.perf_counter()
        fp = self.shared.wanted(node) if self.shared is not None else None
        result = self.shared.get(fp, node) if fp is not None else None
        if result is not None:
            if self.analyze:
                self.stats.setdefault(id(node), NodeStats()).detail.append(
                    "result of an identical aggregation earlier in the statement, reused")
        elif self.shared is not None and (result := self.shared.rollup(node)) is not None:
            if self.analyze:
                self.stats.setdefault(id(node), NodeStats()).detail.append(
                    "rolled up from the result of a grouped aggregation of the same rows")
        else:
            part, operator = OPERATORS[type(node)]
            result = operator(self.parts[part], node)
            if fp is not None:
                self.shared.put(fp, node, result, self.runtime_filters, self.prefilter)
            if self.shared is not None:
                self.shared.keep_grouped(node, result, self.runtime_filters, self.prefilter)
        # the inputs are released, the result is held until the parent is done with it
        self.guard.hold(held + table_nbytes(result))
        st = self.stats.setdefault(id(node), NodeStats())
        st.rows += result.num_rows
        st.seconds += time.perf_counter() - t0
        return result

    # -- expressions -----------------------------------------------------------------------
    def prepare(self, e: exp.Expression, table: pa.Table | None = None) -> exp.Expression:
        """Substitute scalar subquery values and expand avg() for the input's types."""
        if e.find(SubqueryRef, AvgOf) is None:
            return e

        def fix(n):
            if isinstance(n, SubqueryRef):
                return self.scalar_subquery(n)
            if isinstance(n, AvgOf):
                s, c = n.this, n.expression
                typ = table.schema.field(s.name).type if table is not None else None
                if typ is not None and pa.types.is_interval(typ):
                    pass                    # avg(interval): interval / count
                elif typ is not None and (pa.types.is_integer(typ) or (
                        pa.types.is_decimal(typ) and typ.scale == 0)):
                    # avg of integers (their sum: bigint, or numeric for bigints) is
                    # numeric at the scale PostgreSQL's numeric division picks
                    return IntegerAvg(this=s, expression=c)
                elif typ is None or not pa.types.is_decimal(typ):
                    s = exp.Cast(this=s, to=exp.DataType.build("double"))
                elif table is not None:
                    # the sum's declared DECIMAL(38, s) leaves the quotient no digits for
                    # its scale (6); typed by the digits the sums have, avg keeps at least
                    # 16 significant digits, as PostgreSQL's does
                    digits = decimal_digits_needed(table.column(s.name), typ)
                    s = exp.Cast(this=s, to=exp.DataType.build(f"decimal({digits}, {typ.scale})"))
                    c = exp.Cast(this=c, to=exp.DataType.build("decimal(19, 0)"))
                return exp.Div(this=s, expression=exp.Nullif(this=c, expression=exp.Literal.number(0)))
            return n
        return e.transform(fix, copy=True)

    def eval(self, e: exp.Expression, t: pa.Table):
        """`e` over every row of `t`, a morsel at a time (a check between two)."""
        return self._morsels(evaluate, self.prepare(e, t), t)

    def eval_filter(self, e: exp.Expression, t: pa.Table):
        return self._morsels(evaluate_filter, self.prepare(e, t), t)

    def _morsels(self, fn, e: exp.Expression, t):
        n, step = t.num_rows, _guard.MORSEL_ROWS
        if n <= step:
            return fn(e, t)
        parts = []
        for start in range(0, n, step):
            self.guard.check()
            a = fn(e, slice_rows(t, start, step))
            self.guard.charge(array_nbytes(a))
            parts.append(a)
        return join_parts(parts)

    def filter_table(self, t: pa.Table, cond: exp.Expression) -> pa.Table:
        """The rows of `t` that satisfy `cond`, a morsel at a time."""
        n, step = t.num_rows, _guard.MORSEL_ROWS
        cond = self.prepare(cond, t)
        if n <= step:
            return t.filter(evaluate_filter(cond, t))
        parts = []
        for start in range(0, n, step):
            self.guard.check()
            m = slice_rows(t, start, step)
            part = m.filter(evaluate_filter(cond, m))
            self.guard.charge(table_nbytes(part))
            parts.append(part)
        return concat_tables(parts)

    def source(self, t: pa.Table, prepare=None, rows: int | None = None
               ) -> "pa.RecordBatchReader":
        """`t` as a stream of morsels (of `rows` rows, default MORSEL_ROWS) for an Acero
        plan, each optionally transformed by `prepare(table) -> table`; the guard is
        checked before each morsel, inside the plan, which stops it (the exception comes
        out of the plan unchanged)."""
        step = rows or _guard.MORSEL_ROWS
        first = slice_rows(t, 0, step)
        if prepare is not None:
            first = prepare(first)
        schema = first.schema

        def gen():
            yield from first.to_batches()
            for start in range(step, t.num_rows, step):
                self.guard.check()
                m = slice_rows(t, start, step)
                if prepare is not None:
                    m = prepare(m)
                    if m.schema != schema:
                        m = m.cast(schema)
                yield from m.to_batches()
        return pa.RecordBatchReader.from_batches(schema, gen())

    def collect(self, reader: "pa.RecordBatchReader", each=None) -> pa.Table:
        """Read an Acero plan's output, metering it batch by batch; `each(t) -> t`, if
        given, shrinks each batch (as a Table) before it is kept and charged."""
        batches = []
        parts = []
        try:
            for b in reader:
                self.guard.check()
                if each is None:
                    self.guard.charge(b.nbytes)
                    batches.append(b)
                else:
                    t = each(pa.Table.from_batches([b], schema=reader.schema))
                    self.guard.charge(table_nbytes(t))
                    parts.append(t)
        finally:
            reader.close()
        if each is not None:
            if not parts:
                return each(reader.schema.empty_table())
            return concat_tables(parts) if len(parts) != 1 else parts[0]
        return pa.Table.from_batches(batches, schema=reader.schema)

    def scalar_subquery(self, ref: SubqueryRef) -> Const:
        v = self.subquery_values.get(id(ref.this))
        if v is None:
            sub = Executor(self.catalog, analyze=self.analyze, check_cancel=self.check_cancel,
                           schema_only=self.schema_only, snapshot=self.snapshot)
            sub.stats = self.stats
            sub.shared = self.shared
            t = sub.run_output(ref.this)
            if t.num_columns != 1:
                raise SqlError("subquery must return only one column", "42601")
            if t.num_rows > 1:
                raise SqlError("more than one row returned by a subquery used as an "
                               "expression", "21000")
            col = t.column(0)
            v = Const(this=col[0] if t.num_rows else pa.scalar(None, col.type))
            self.subquery_values[id(ref.this)] = v
        return v

    def constant(self, e: exp.Expression) -> Any:
        e = self.prepare(e)
        arr = evaluate(e, empty_rows(1))
        return arr[0].as_py()

    def timestamp(self, e: exp.Expression) -> int:
        """FOR SYSTEM_TIME AS OF / table_changes bound -> a HybridTime."""
        v = self.constant(e)
        if isinstance(v, bool) or v is None:
            raise SqlError("a snapshot time must be a timestamp or a HybridTime integer",
                           "22023")
        if isinstance(v, int):
            return v
        if isinstance(v, str):
            try:
                v = _dt.datetime.fromisoformat(v)
            except ValueError:
                raise SqlError(f'invalid input syntax for type timestamp: "{v}"',
                               "22007") from None
        if isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
            v = _dt.datetime(v.year, v.month, v.day)
        if isinstance(v, _dt.datetime):
            if v.tzinfo is None:
                v = v.replace(tzinfo=_dt.timezone.utc)
            micros = int(v.timestamp()) * 1_000_000 + v.microsecond
            return _clock.upper_bound_for_micros(micros)
        raise SqlError(f"cannot use {type(v).__name__} as a snapshot time", "22023")

    # -- leaves ----------------------------------------------------------------------------
    def run_scan(self, node: L.Scan) -> pa.Table:
        table = self.catalog.table(node.table)
        keys = [node.key(c) for c in node.columns]
        if self.schema_only:
            fields = [pa.field(k, f.type) for k, f in
                      zip(keys, table.schema.arrow_schema(node.columns))]
            if node.changes:
                fields.append(pa.field(node.key("is_deleted"), pa.bool_()))
            return pa.schema(fields).empty_table()
        if node.changes:
            start, end = (self.timestamp(e) for e in node.changes)
            t = table.diff_scan(start, end, columns=node.columns)
            t = t.rename_columns(keys + [node.key("is_deleted")])
            for f in node.filters:
                t = t.filter(self.eval_filter(f, t))
            return t
        if getattr(table, "virtual", False):
            # A system view (e.g. pg_catalog, provided by the wire layer through a catalog
            # wrapper): `to_arrow(columns)` materialises it; filters apply here.
            t = table.to_arrow(node.columns)
            t = pa.Table.from_arrays(t.columns, names=keys) if keys else empty_rows(t.num_rows)
            for f in node.filters:
                t = t.filter(self.eval_filter(f, t))
            return t
        if not keys:
            return empty_rows(sum(b.num_rows for b in self._scan_batches(node, table)))
        batches = []
        for b in self._scan_batches(node, table):
            self.guard.charge(b.nbytes)
            batches.append(b)
        return pa.Table.from_batches(batches, schema=self._scan_schema(node, table))

    def _scan_schema(self, node: L.Scan, table) -> pa.Schema:
        """The schema of the batches `_scan_batches` yields: the columns it keeps."""
        fields = [pa.field(node.key(c), f.type) for c, f in
                  zip(node.columns, table.schema.arrow_schema(node.columns))]
        kept = self._scan_kept(node)
        return pa.schema(fields if kept is None else [fields[i] for i in kept])

    def _scan_kept(self, node: L.Scan) -> list[int] | None:
        """Positions (in `node.columns`) of the columns a scan with residual filters yields,
        when some are read by those filters only (TPC-H Q13's o_comment, Q04's and Q21's
        l_commitdate / l_receiptdate, Q09's p_name): they are dropped as the rows are
        filtered, so the filter's copy of the rows kept, the scan's result held, and the
        joins and aggregations above never carry them. None: every column is kept (no
        filter, nothing dropped, or no statement root to tell what is read above). At
        least one column is kept (the executor keeps tables without columns off its paths:
        several Arrow kernels lose their row count, `kernels.concat_tables`)."""
        if not node.filters or not node.columns or self.root is None:
            return None
        keys = [node.key(c) for c in node.columns]
        needed = self.needed_above(node)
        kept = [i for i, k in enumerate(keys) if k in needed]
        if len(kept) == len(keys):
            return None
        return kept or [0]

    def _scan_batches(self, node: L.Scan, table, post=None):
        """The tablets' batches, renamed to internal keys, residual filters applied; the
        engine scan is closed when the generator is (also on early exit: LIMIT). `post`
        (a streamed aggregation's `PrepareInScan`): a function of a chunk's filtered
        batches run after the filter on the scan's pool thread (`TableScan.filter_chunks`),
        whose results are yielded instead; not where the scan runs no chunk function (a
        cluster's remote scan, a filter that runs a subquery, per-batch runtime filters)."""
        st = self.stats.setdefault(id(node), NodeStats())
        keys = [node.key(c) for c in node.columns]
        snapshot = self.timestamp(node.snapshot) if node.snapshot is not None else \
            self.snapshot
        kept = self._scan_kept(node)
        if kept is not None and self.analyze:
            st.detail.append("dropped once filtered (read by the filter only): " + ", ".join(
                node.columns[i] for i in range(len(keys)) if i not in set(kept)))
        key = _point_key(node, table)
        if key is not None:
            # Every key column is pinned by an equality: one row at most, read with the
            # engine's point lookup (one tablet, bloom filters, no scan set-up).
            row = table.lookup(key, node.columns or None, snapshot)
            st.detail.append("point lookup by primary key")
            if row is None:
                return
            if not node.columns:
                yield from empty_rows(1).to_batches()
                return
            b = pa.RecordBatch.from_pylist([row], schema=table.schema.arrow_schema(node.columns))
            b = pa.RecordBatch.from_arrays(b.columns, names=keys)
            yield b if kept is None else b.select(kept)
            return
        runtime = self.runtime_filters.get(id(node)) if keys else None
        pushed = list(node.pushed)
        if runtime and getattr(table, "member_predicates", False):
            # into the engine scan: zone maps skip blocks without a key of the filter, and
            # lazy materialisation decodes the other columns only where it keeps rows. The
            # filters come first: an integer key and a bitmap gather cost less than the
            # pushed predicates' (often string) columns decoded whole (TPC-H Q19: 485 part
            # keys before l_shipmode / l_shipinstruct), and one that keeps most rows
            # switches itself off
            name = dict(zip(keys, node.columns))
            pushed = [ColumnPredicate.member(name[f.key], runtime_filters.ScanTest(f))
                      for f in runtime] + pushed
            runtime = None
        scan = table.scan(node.columns, pushed, snapshot)
        cond = and_all(node.filters)
        # Residual filters run over up to a morsel of rows at once: their evaluation costs
        # ~1 ms per call whatever the rows (the expression is interpreted), and the engine's
        # blocks are smaller, the more so once a runtime filter has thinned them.
        held: list[pa.RecordBatch] = []
        held_rows = 0
        # (not a condition that runs a subquery or a host function per batch: a subquery
        # scans on the same pool, and a pool thread waiting on its own pool's chunks
        # deadlocks it)
        in_scan = keys and not runtime and hasattr(scan, "filter_chunks") and (
            cond is None or cond.find(AvgOf, SubPlan, InSubPlan, HostCall) is None)
        if cond is None and post is None:
            in_scan = False             # no work for the pool threads: batches as read
        try:
            if in_scan:
                # on the pool thread that read each chunk of a tablet's batches (both
                # cores: TPC-H Q04's, Q12's and Q21's date comparisons over lineitem, Q13's
                # NOT LIKE over orders), the scalar subqueries substituted first, here
                work = _ChunkFilter(keys, self.prepare(cond) if cond is not None else None,
                                    kept)
                scan.filter_chunks(work if post is None else
                                   lambda batches: post(work(batches)))
                for b in scan:
                    self.check_cancel()
                    yield b
                return
            for b in scan:
                self.check_cancel()
                if keys:
                    b = pa.RecordBatch.from_arrays(b.columns, names=keys)
                if runtime and b.num_rows:  # before the residual filter: cheaper, exact
                    b = runtime_filters.apply(runtime, b)
                if cond is None:
                    if b.num_rows:
                        yield b
                    continue
                if not keys:                # with no columns: a filter on constants only
                    b = b.filter(self.eval_filter(cond, b))
                    if b.num_rows:
                        yield b
                    continue
                if b.num_rows:
                    held.append(b)
                    held_rows += b.num_rows
                if held_rows >= _guard.MORSEL_ROWS // 2:
                    yield from self._filtered_batches(held, cond, kept)
                    held, held_rows = [], 0
            if held:
                yield from self._filtered_batches(held, cond, kept)
        finally:
            scan.close()
            st.scan = scan.stats.scan
            st.tablets = (scan.stats.tablets_scanned, scan.stats.tablets_total)
            st.detail.extend(served_by(scan.stats.per_tablet))
            filters = self.runtime_filters.get(id(node)) if keys else None
            if filters and self.analyze:
                st.detail.extend(f.describe() for f in filters)

    def _filtered_batches(self, batches: list[pa.RecordBatch], cond: exp.Expression,
                          kept: list[int] | None = None):
        """The rows of `batches` that pass `cond`, of the columns at `kept` (None: all)."""
        t = pa.Table.from_batches(batches)
        mask = self.eval_filter(cond, t)
        t = (t if kept is None else t.select(kept)).filter(mask)
        for b in t.to_batches():
            if b.num_rows:
                yield b

    # -- streaming ---------------------------------------------------------------------------
    def stream_output(self, out: L.Output):
        """The result as a sequence of RecordBatches with the output names. Plans that are
        projections, filters and limits over one table scan stream batch by batch (a large
        SELECT never sits in memory whole); anything else is computed, then sliced."""
        self.root = out
        names = list(out.names)
        for b in self.stream_batches(out.plan):
            cols = [b.column(b.schema.get_field_index(k)) for k in out.keys]
            yield pa.RecordBatch.from_arrays(cols, names=names)

    def streamable(self, node: L.Node) -> bool:
        if isinstance(node, (L.Project, L.Filter, L.Limit)):
            return self.streamable(node.input)
        if isinstance(node, L.Series):
            return True
        if isinstance(node, L.Scan):
            return not node.changes and not self.schema_only and node.columns and \
                not getattr(self.catalog.table(node.table), "virtual", False)
        return False

    def stream_batches(self, node: L.Node, post=None):
        """`node`'s rows as RecordBatches, streamed where `streamable`. `post`: see
        `_scan_batches` (a Scan's only: a Filter or Project above it streams as read), so
        some items may be what it returned (a streamed aggregation's prepared morsels,
        with the rows they came from as `num_rows`)."""
        if not self.streamable(node):
            t = self.run(node)
            yield from t.to_batches(max_chunksize=65536) if t.num_rows else \
                [pa.RecordBatch.from_pylist([], schema=t.schema)]
            return
        st = self.stats.setdefault(id(node), NodeStats())
        if isinstance(node, L.Series):
            for b in self._series_batches(node):
                st.rows += b.num_rows
                yield b
        elif isinstance(node, L.Scan):
            src = self._scan_batches(node, self.catalog.table(node.table), post)
            empty = self._scan_schema(node, self.catalog.table(node.table))
            got = False
            for b in src:
                got = True
                st.rows += b.num_rows
                yield b
            if not got:
                yield pa.RecordBatch.from_pylist([], schema=empty)
        elif isinstance(node, L.Filter):
            for b in self.stream_batches(node.input):
                b = b.filter(self.eval_filter(node.condition, b))
                st.rows += b.num_rows
                yield b
        elif isinstance(node, L.Project):
            for b in self.stream_batches(node.input):
                arrays = [as_chunked(self.eval(e, b), b.num_rows) for _, e in node.items]
                out = pa.RecordBatch.from_arrays(
                    [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
                     for a in arrays], names=[k for k, _ in node.items])
                st.rows += out.num_rows
                yield out
        else:  # Limit
            skip, left = node.offset, node.limit
            gen = self.stream_batches(node.input)
            try:
                for b in gen:
                    if skip:
                        cut = min(skip, b.num_rows)
                        b, skip = b.slice(cut), skip - cut
                    if left is not None:
                        b = b.slice(0, left)
                        left -= b.num_rows
                    st.rows += b.num_rows
                    yield b
                    if left == 0:
                        break
            finally:
                gen.close()

    def run_series(self, node: L.Series) -> pa.Table:
        batches = []
        for b in self._series_batches(node):
            self.guard.charge(b.nbytes)
            batches.append(b)
        return pa.Table.from_batches(batches)

    def _series_batches(self, node: L.Series):
        """A Series' rows, MORSEL_ROWS at a time (numpy arange; a check before each).
        Describing (schema_only) makes its first row only: enough for the operators above
        to type their results as they would over the rows (as a VALUES list's are)."""
        n = min(node.count, 1) if self.schema_only else node.count
        step = _guard.MORSEL_ROWS
        for lo in range(0, max(n, 1), step):
            self.guard.check()
            idx = np.arange(lo, min(n, lo + step), dtype=np.int64)
            values = pa.array(node.start + idx * node.step, pa.int64())
            cols = [values.cast(node.type) if node.type != pa.int64() else values]
            if len(node.keys) > 1:
                cols.append(pa.array(idx + 1, pa.int64()))
            yield pa.RecordBatch.from_arrays(cols, names=list(node.keys))

    def run_values(self, node: L.Values) -> pa.Table:
        if not node.keys:
            return empty_rows(len(node.rows))
        one = empty_rows(1)
        cols = []
        for j, k in enumerate(node.keys):
            parts = [self.eval(r[j], one) for r in node.rows]
            cols.append(concat_promote(parts, k))
        return pa.table(dict(zip(node.keys, cols)))

    # -- row operators ---------------------------------------------------------------------
    def run_filter(self, node: L.Filter) -> pa.Table:
        t = self.run(node.input)
        return self.filter_table(t, node.condition)

    def run_project(self, node: L.Project) -> pa.Table:
        t = self.run(node.input)
        arrays = [self.eval(e, t) for _, e in node.items]
        if not arrays:
            return empty_rows(t.num_rows)
        return pa.Table.from_arrays([as_chunked(a, t.num_rows) for a in arrays],
                                    names=[k for k, _ in node.items])

    def run_limit(self, node: L.Limit) -> pa.Table:
        t = self.run(node.input)
        end = t.num_rows if node.limit is None else min(t.num_rows, node.offset + node.limit)
        return slice_rows(t, node.offset, max(0, end - node.offset))

    def needed_above(self, node: L.Node) -> set[str]:
        """Keys that nodes outside `node`'s subtree (or the output) read."""
        if id(node) in self.needed:
            return self.needed[id(node)]
        inside = {id(n) for n in L.walk(node)}
        needed = set(self.root.keys) if self.root is not None else set()
        roots = [self.root.plan] if self.root is not None else []
        for r in roots:
            for n in _all_nodes(r):
                if id(n) in inside:
                    continue
                for e in n.expressions():
                    needed |= refs(e)
                if isinstance(n, (L.Distinct, L.SetOp, L.RecursiveUnion)):
                    for c in n.children():
                        needed |= set(output_keys(c))
        if self.root is None:
            needed = set(output_keys(node))
        self.needed[id(node)] = needed
        return needed


# The operator table: which method runs each logical plan node (`Executor.run` dispatches
# on the node's exact class). A node class missing here is a planner bug (KeyError).
# node class -> (the part of the Executor that runs it, its run_<node> method)
OPERATORS: dict[type[L.Node], tuple[str, Callable[[Any, Any], pa.Table]]] = {
    L.Scan: ("core", Executor.run_scan),
    L.Values: ("core", Executor.run_values),
    L.Series: ("core", Executor.run_series),
    L.Filter: ("core", Executor.run_filter),
    L.Project: ("core", Executor.run_project),
    L.Limit: ("core", Executor.run_limit),
    L.Join: ("joins", JoinOperators.run_join),
    L.MultiJoin: ("joins", JoinOperators.run_multijoin),
    L.Sort: ("sorts", SortOperators.run_sort),
    L.Distinct: ("sorts", SortOperators.run_distinct),
    L.SetOp: ("sorts", SortOperators.run_setop),
    L.RecursiveUnion: ("sorts", SortOperators.run_recursiveunion),
    L.WorkTable: ("sorts", SortOperators.run_worktable),
    L.Aggregate: ("aggregates", AggregateOperators.run_aggregate),
    L.Window: ("aggregates", AggregateOperators.run_window),
}
