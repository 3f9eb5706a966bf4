"""Physical execution of a logical plan over Arrow: every operator consumes and produces
`pyarrow.Table`s (scans stream RecordBatches from the tablets, filtered batch by batch).

Operators and the kernels they use:
  Scan        engine `Table.scan` (tablets pruned, scanned in parallel at one snapshot, engine
              predicates, lazy materialization) + residual filters per batch
  Filter      `planner.expr.evaluate_filter` + `Table.filter`
  Project     `planner.expr.evaluate`
  MultiJoin   greedy operator ordering (GOO): repeatedly join the two connected inputs whose
              estimated result is smallest, estimating |A|*|B| / max(ndv_A(keys), ndv_B(keys))
              from the actual inputs (their row counts and distinct key counts); the smaller
              side is the hash table's build side (Acero hash join)
  Join        Acero hash join (left outer, full outer, left semi, left anti); a residual
              condition is applied on the inner join of the two sides and mapped back to the
              left rows by row number; NOT IN is a null-aware anti join
  Aggregate   Acero hash aggregation (`Table.group_by`), or whole-column kernels without
              GROUP BY
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
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import itertools
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine import clock as _clock
from engine.tablet.diskrowset import ScanStats
from planner import logical as L
from planner.binder import AvgOf, SubqueryRef, and_all, keycol, refs
from planner.errors import SqlError
from planner import guard as _guard
from planner.expr import ArrayType, Const, evaluate, evaluate_filter, parse_array_literal
from planner.guard import QueryGuard
from planner.rules import _all_nodes, output_keys

MAX_CROSS_JOIN_ROWS = 50_000_000


@dataclasses.dataclass
class NodeStats:
    rows: int = 0
    seconds: float = 0.0
    scan: ScanStats | None = None
    tablets: tuple[int, int] | None = None
    detail: list[str] = dataclasses.field(default_factory=list)


def empty_rows(n: int) -> pa.Table:
    """A table with `n` rows and no columns (SELECT without FROM, count(*) scans)."""
    return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])


class Executor:
    def __init__(self, catalog, *, analyze: bool = False, check_cancel=None,
                 schema_only: bool = False):
        """`schema_only`: scans return no rows (Describe learns result types cheaply)."""
        self.catalog = catalog
        self.analyze = analyze
        self.schema_only = schema_only
        self.stats: dict[int, NodeStats] = {}
        self._subquery_values: dict[int, Const] = {}
        self.guard = QueryGuard.of(check_cancel)     # cancel + memory (planner/guard.py)
        self._check_cancel = self.guard
        self._needed: dict[int, set[str]] = {}
        self._prefilter: dict[int, tuple] = {}
        self._root: L.Output | None = None

    # -- entry -----------------------------------------------------------------------------
    def run_output(self, out: L.Output) -> pa.Table:
        self._root = out
        t = self.run(out.plan)
        cols = [t.column(k) for k in out.keys]
        return pa.Table.from_arrays(cols, names=list(out.names)) if cols else t

    def run(self, node: L.Node) -> pa.Table:
        self.guard.check()
        held = self.guard.held
        t0 = time.perf_counter()
        fn = getattr(self, "_" + type(node).__name__.lower())
        result = fn(node)
        # the inputs are released, the result is held until the parent is done with it
        self.guard.hold(held + _table_nbytes(result))
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
                if typ is None or not pa.types.is_decimal(typ):
                    s = exp.Cast(this=s, to=exp.DataType.build("double"))
                elif table is not None:
                    # the sum's declared DECIMAL(38, s) leaves the quotient no digits for
                    # its scale (6); typed by the digits the sums have, avg keeps at least
                    # 16 significant digits, as PostgreSQL's does
                    s = exp.Cast(this=s, to=exp.DataType.build(
                        f"decimal({_digits(table.column(s.name), typ)}, {typ.scale})"))
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
            a = fn(e, t.slice(start, step))
            self.guard.charge(_array_nbytes(a))
            parts.append(a)
        return _join_parts(parts)

    def filter_table(self, t: pa.Table, cond: exp.Expression) -> pa.Table:
        """The rows of `t` that satisfy `cond`, a morsel at a time."""
        n, step = t.num_rows, _guard.MORSEL_ROWS
        cond = self.prepare(cond, t)
        if n <= step:
            return t.filter(evaluate_filter(cond, t))
        parts = []
        for start in range(0, n, step):
            self.guard.check()
            m = t.slice(start, step)
            part = m.filter(evaluate_filter(cond, m))
            self.guard.charge(_table_nbytes(part))
            parts.append(part)
        return pa.concat_tables(parts)

    def source(self, t: pa.Table, prepare=None, rows: int | None = None
               ) -> "pa.RecordBatchReader":
        """`t` as a stream of morsels (of `rows` rows, default MORSEL_ROWS) for an Acero
        plan, each optionally transformed by `prepare(table) -> table`; the guard is
        checked before each morsel, inside the plan, which stops it (the exception comes
        out of the plan unchanged)."""
        step = rows or _guard.MORSEL_ROWS
        first = t.slice(0, step)
        if prepare is not None:
            first = prepare(first)
        schema = first.schema

        def gen():
            yield from first.to_batches()
            for start in range(step, t.num_rows, step):
                self.guard.check()
                m = t.slice(start, step)
                if prepare is not None:
                    m = prepare(m)
                    if m.schema != schema:
                        m = m.cast(schema)
                yield from m.to_batches()
        return pa.RecordBatchReader.from_batches(schema, gen())

    def collect(self, reader: "pa.RecordBatchReader") -> pa.Table:
        """Read an Acero plan's output, metering it batch by batch."""
        batches = []
        try:
            for b in reader:
                self.guard.charge(b.nbytes)
                batches.append(b)
        finally:
            reader.close()
        return pa.Table.from_batches(batches, schema=reader.schema)

    def scalar_subquery(self, ref: SubqueryRef) -> Const:
        v = self._subquery_values.get(id(ref.this))
        if v is None:
            sub = Executor(self.catalog, analyze=self.analyze, check_cancel=self._check_cancel,
                           schema_only=self.schema_only)
            sub.stats = self.stats
            t = sub.run_output(ref.this)
            if t.num_columns != 1:
                raise SqlError("subquery must return only one column", "42601")
            if t.num_rows > 1:
                raise SqlError("more than one row returned by a subquery used as an "
                               "expression", "21000")
            col = t.column(0)
            v = Const(this=col[0] if t.num_rows else pa.scalar(None, col.type))
            self._subquery_values[id(ref.this)] = v
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
    def _scan(self, node: L.Scan) -> pa.Table:
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
        return pa.schema([pa.field(node.key(c), f.type) for c, f in
                          zip(node.columns, table.schema.arrow_schema(node.columns))])

    def _scan_batches(self, node: L.Scan, table):
        """The tablets' batches, renamed to internal keys, residual filters applied; the
        engine scan is closed when the generator is (also on early exit: LIMIT)."""
        st = self.stats.setdefault(id(node), NodeStats())
        keys = [node.key(c) for c in node.columns]
        snapshot = self.timestamp(node.snapshot) if node.snapshot is not None else None
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
            yield pa.RecordBatch.from_arrays(b.columns, names=keys)
            return
        scan = table.scan(node.columns, node.pushed, snapshot)
        cond = and_all(node.filters)
        try:
            for b in scan:
                self._check_cancel()
                if keys:
                    b = pa.RecordBatch.from_arrays(b.columns, names=keys)
                if cond is not None:        # with no columns: a filter on constants only
                    b = b.filter(self.eval_filter(cond, b))
                if b.num_rows:
                    yield b
        finally:
            scan.close()
            st.scan = scan.stats.scan
            st.tablets = (scan.stats.tablets_scanned, scan.stats.tablets_total)

    # -- streaming ---------------------------------------------------------------------------
    def stream_output(self, out: L.Output):
        """The result as a sequence of RecordBatches with the output names. Plans that are
        projections, filters and limits over one table scan stream batch by batch (a large
        SELECT never sits in memory whole); anything else is computed, then sliced."""
        self._root = out
        names = list(out.names)
        for b in self._stream(out.plan):
            cols = [b.column(b.schema.get_field_index(k)) for k in out.keys]
            yield pa.RecordBatch.from_arrays(cols, names=names)

    def _streamable(self, node: L.Node) -> bool:
        if isinstance(node, (L.Project, L.Filter, L.Limit)):
            return self._streamable(node.input)
        if isinstance(node, L.Scan):
            return not node.changes and not self.schema_only and node.columns and \
                not getattr(self.catalog.table(node.table), "virtual", False)
        return False

    def _stream(self, node: L.Node):
        if not self._streamable(node):
            t = self.run(node)
            yield from t.to_batches(max_chunksize=65536) if t.num_rows else \
                [pa.RecordBatch.from_pylist([], schema=t.schema)]
            return
        st = self.stats.setdefault(id(node), NodeStats())
        if isinstance(node, L.Scan):
            src = self._scan_batches(node, self.catalog.table(node.table))
            empty = self._scan_schema(node, self.catalog.table(node.table))
            got = False
            for b in src:
                got = True
                st.rows += b.num_rows
                yield b
            if not got:
                yield pa.RecordBatch.from_pylist([], schema=empty)
        elif isinstance(node, L.Filter):
            for b in self._stream(node.input):
                b = b.filter(self.eval_filter(node.condition, b))
                st.rows += b.num_rows
                yield b
        elif isinstance(node, L.Project):
            for b in self._stream(node.input):
                arrays = [_chunked(self.eval(e, b), b.num_rows) for _, e in node.items]
                out = pa.RecordBatch.from_arrays(
                    [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
                     for a in arrays], names=[k for k, _ in node.items])
                st.rows += out.num_rows
                yield out
        else:  # Limit
            skip, left = node.offset, node.limit
            gen = self._stream(node.input)
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

    def _values(self, node: L.Values) -> pa.Table:
        if not node.keys:
            return empty_rows(len(node.rows))
        one = empty_rows(1)
        cols = []
        for j, k in enumerate(node.keys):
            parts = [self.eval(r[j], one) for r in node.rows]
            cols.append(_concat_promote(parts, k))
        return pa.table(dict(zip(node.keys, cols)))

    # -- row operators ---------------------------------------------------------------------
    def _filter(self, node: L.Filter) -> pa.Table:
        t = self.run(node.input)
        return self.filter_table(t, node.condition)

    def _project(self, node: L.Project) -> pa.Table:
        t = self.run(node.input)
        arrays = [self.eval(e, t) for _, e in node.items]
        if not arrays:
            return empty_rows(t.num_rows)
        return pa.Table.from_arrays([_chunked(a, t.num_rows) for a in arrays],
                                    names=[k for k, _ in node.items])

    def _limit(self, node: L.Limit) -> pa.Table:
        t = self.run(node.input)
        end = t.num_rows if node.limit is None else min(t.num_rows, node.offset + node.limit)
        return t.slice(node.offset, max(0, end - node.offset))

    def _distinct(self, node: L.Distinct) -> pa.Table:
        t = self.run(node.input)
        return self.distinct(t)

    def distinct(self, t: pa.Table) -> pa.Table:
        if t.num_columns == 0 or t.num_rows <= _guard.MORSEL_ROWS:
            return distinct(t)
        # -0.0 and 0.0 are one value, as in the one-call distinct()
        prepare = _hash_keys if any(pa.types.is_floating(f.type) for f in t.schema) else None
        return self.aggregate_plan(t, t.column_names, [], prepare).select(t.column_names)

    def aggregate_plan(self, t: pa.Table, keys: list[str], spec: list, prepare) -> pa.Table:
        """Acero hash (or, without keys, scalar) aggregation of `t`'s morsels, each turned
        into the aggregation's input columns by `prepare` on its way in."""
        from pyarrow import acero
        agg = acero.Declaration("aggregate", acero.AggregateNodeOptions(spec, keys=keys))
        if t.num_rows <= _guard.MORSEL_ROWS:     # one morsel of work: no stream to set up
            src = acero.Declaration("table_source", acero.TableSourceNodeOptions(
                prepare(t) if prepare is not None else t))
            return acero.Declaration.from_sequence([src, agg]).to_table(use_threads=True)
        decl = acero.Declaration.from_sequence([
            acero.Declaration("record_batch_reader_source",
                              acero.RecordBatchReaderSourceNodeOptions(
                                  self.source(t, prepare))),
            agg])
        return self.collect(decl.to_reader(use_threads=True))

    def _sort(self, node: L.Sort) -> pa.Table:
        t = self.run(node.input)
        if t.num_rows <= 1:
            return t
        work: dict = {}
        sort_keys: list = []
        for i, k in enumerate(node.keys):
            _add_sort_key(work, sort_keys, f"s{i}", self.eval(k.expr, t), k)
        keys_table = pa.table(work)
        if node.limit is not None and node.limit < t.num_rows // 8:
            idx = self._top_k(keys_table, node.limit, sort_keys)
            idx = idx.take(pc.sort_indices(keys_table.take(idx), sort_keys=sort_keys))
        else:
            idx = self.sort_indices(keys_table, sort_keys)
            if node.limit is not None:
                idx = idx.slice(0, node.limit)
        return self.take(t, idx)

    def sort_indices(self, keys: pa.Table, sort_keys: list) -> pa.Array:
        """`pc.sort_indices(keys, sort_keys)` (stable), cut into steps with a check between:
        a sample sort on the first key when it is numeric or temporal. Splitters from an
        evenly strided sample cut the rows into buckets of ~4 morsels by the first key's
        value (a morsel at a time); each bucket is sorted on its own, in bucket order. Rows
        with equal first keys share a bucket, rows keep their order inside a bucket, so
        the permutation is the one the single kernel call gives. Other key types, and a
        first key too skewed to split, are sorted in one call."""
        n, step = keys.num_rows, _guard.MORSEL_ROWS
        self.guard.check()
        col, order = sort_keys[0]
        nulls = None
        if col.endswith("$null") and len(sort_keys) > 1:     # the NULL flag of the key
            nulls, (col, order) = (sort_keys[0][0], sort_keys[0][1]), sort_keys[1]
        typ = keys.schema.field(col).type
        if n <= 4 * step or not (pa.types.is_integer(typ) or pa.types.is_floating(typ) or
                                 pa.types.is_date(typ) or pa.types.is_timestamp(typ) or
                                 pa.types.is_time(typ) or pa.types.is_duration(typ)):
            return pc.sort_indices(keys, sort_keys=sort_keys)
        vals = _sortable_numpy(keys.column(col))
        if vals.dtype.kind == "f" and np.isnan(vals).any():    # Arrow's NaN order: one call
            return pc.sort_indices(keys, sort_keys=sort_keys)
        flag = None
        if nulls is not None:
            flag = keys.column(nulls[0]).to_numpy(zero_copy_only=False)
        sample = vals[:: max(1, n // 8192)]
        if flag is not None:
            sample = sample[~flag[:: max(1, n // 8192)]]
        nb = max(2, n // (4 * step))
        splitters = np.unique(np.quantile(sample, np.linspace(0, 1, nb + 1)[1:-1],
                                          method="lower")) if len(sample) else sample
        if len(splitters) < 2:
            return pc.sort_indices(keys, sort_keys=sort_keys)
        nbk = len(splitters) + 3                # NULLs first | values ... | NULLs last
        members: list[list[np.ndarray]] = [[] for _ in range(nbk)]
        for start in range(0, n, step):
            self.guard.check()
            v = vals[start:start + step]
            b = np.searchsorted(splitters, v, side="right")
            if order == "descending":
                b = len(splitters) - b
            b = b + 1                           # 1..len(splitters)+1
            if flag is not None:
                f = flag[start:start + step]
                # NULLs first (the flag sorts descending): bucket 0; else the last one
                b = np.where(f, 0 if nulls[1] == "descending" else nbk - 1, b)
            pos = np.argsort(b, kind="stable")
            counts = np.bincount(b, minlength=nbk)
            at = 0
            for i, c in enumerate(counts):
                if c:
                    members[i].append(pos[at:at + c] + start)
                    at += c
        out = []
        for parts in members:
            if not parts:
                continue
            self.guard.check()
            rows = pa.array(np.concatenate(parts))
            out.append(rows.take(pc.sort_indices(keys.take(rows), sort_keys=sort_keys)))
        return pa.concat_arrays(out).cast(pa.uint64())     # sort_indices' type

    def _top_k(self, keys_table: pa.Table, k: int, sort_keys) -> pa.Array:
        """Row numbers of the first `k` rows in `sort_keys` order (unordered): the top k
        of each morsel, then the top k of those candidates."""
        step = _guard.MORSEL_ROWS
        n = keys_table.num_rows
        if n <= step:
            return pc.select_k_unstable(keys_table, k=k, sort_keys=sort_keys)
        cands = []
        for start in range(0, n, step):
            self.guard.check()
            m = keys_table.slice(start, step)
            i = pc.select_k_unstable(m, k=min(k, m.num_rows), sort_keys=sort_keys)
            cands.append(pc.add(i.cast(pa.int64()), start))
        cand = pa.concat_arrays(cands)
        best = pc.select_k_unstable(keys_table.take(cand), k=k, sort_keys=sort_keys)
        return cand.take(best)

    def take(self, t: pa.Table, idx) -> pa.Table:
        """`t.take(idx)`, a morsel of indices at a time."""
        step = _guard.MORSEL_ROWS
        if len(idx) <= step:
            return t.take(idx)
        parts = []
        for start in range(0, len(idx), step):
            self.guard.check()
            part = t.take(idx.slice(start, step))
            self.guard.charge(_table_nbytes(part))
            parts.append(part)
        return pa.concat_tables(parts)

    # -- window functions ------------------------------------------------------------------
    def _window(self, node: L.Window) -> pa.Table:
        t = self.run(node.input)
        for c in node.calls:
            t = t.append_column(c.key, self.window_call(c, t))
        return t

    def window_call(self, c: L.WindowCall, t: pa.Table) -> pa.Array:
        """One window function over all rows of `t`: rows are sorted by (partition, order)
        once, each function is computed on the sorted rows with numpy/pyarrow segment
        arithmetic, and the result is put back in the input's row order."""
        n = t.num_rows
        work, sort_keys = {}, []
        parts = [_chunked(self.eval(e, t), n) for e in c.partition]
        orders = [_chunked(self.eval(k.expr, t), n) for k in c.order]
        for i, a in enumerate(parts):
            work[f"p{i}"] = a
            sort_keys.append((f"p{i}", "ascending"))
        for i, (k, a) in enumerate(zip(c.order, orders)):
            _add_sort_key(work, sort_keys, f"o{i}", a, k)
        if sort_keys and n:
            idx = self.sort_indices(pa.table(work), sort_keys).to_numpy()
        else:
            idx = np.arange(n, dtype=np.int64)
        pos = np.arange(n, dtype=np.int64)
        new_part = np.zeros(n, dtype=bool)
        if n:
            new_part[0] = True
        for a in parts:
            new_part[1:] |= _changes(a.take(pa.array(idx)))
        new_peer = new_part.copy()
        for a in orders:
            new_peer[1:] |= _changes(a.take(pa.array(idx)))
        part_id = np.cumsum(new_part) - 1
        starts = np.flatnonzero(new_part)
        ends = np.append(starts[1:], n)                 # exclusive
        row_start, row_end = starts[part_id], ends[part_id]
        peer_id = np.cumsum(new_peer) - 1
        peer_starts = np.flatnonzero(new_peer)
        peer_last = np.append(peer_starts[1:], n) - 1
        f = c.func
        if f == "row_number":
            vals = pa.array(pos - row_start + 1)
        elif f == "rank":
            vals = pa.array(peer_starts[peer_id] - row_start + 1)
        elif f == "dense_rank":
            vals = pa.array(peer_id - peer_id[row_start] + 1)
        elif f in ("lag", "lead"):
            x = _chunked(self.eval(c.args[0], t), n).take(pa.array(idx))
            k = 1
            if len(c.args) > 1:
                k = self.constant(c.args[1])
            src = pos - k if f == "lag" else pos + k
            ok = (src >= row_start) & (src < row_end)
            vals = x.take(pa.array(np.where(ok, src, 0)))
            default = pa.scalar(self.constant(c.args[2]) if len(c.args) > 2 else None,
                                vals.type)
            vals = pc.if_else(pa.array(ok), vals, default)
        elif f == "first_value":
            x = _chunked(self.eval(c.args[0], t), n).take(pa.array(idx))
            vals = x.take(pa.array(row_start))
        else:
            vals = self._window_aggregate(c, t, idx, part_id, row_start, row_end,
                                          peer_id, peer_last, pos)
        inverse = np.empty(n, dtype=np.int64)
        inverse[idx] = pos
        return _combine_chunks(vals).take(pa.array(inverse))

    def _window_aggregate(self, c, t, idx, part_id, row_start, row_end, peer_id, peer_last,
                          pos):
        n = t.num_rows
        f = c.func
        if f == "count_star":
            valid = np.ones(n, dtype=np.int64)
            x = None
        else:
            x = _chunked(self.eval(c.args[0], t), n).take(pa.array(idx))
            _check_aggregate_arg(f, f, x.type)
            valid = pc.is_valid(x).to_numpy(zero_copy_only=False).astype(np.int64)
        # the last row each row's frame reaches
        if c.frame == "partition":
            last = row_end - 1
        elif c.frame == "rows":
            last = pos
        else:                                   # RANGE: up to the current row's last peer
            last = peer_last[peer_id]
        ccount = np.cumsum(valid)
        before = np.where(row_start > 0, ccount[np.maximum(row_start - 1, 0)], 0)
        count = ccount[last] - before
        if f in ("count", "count_star"):
            return pa.array(count)
        if f in ("sum", "avg"):
            if pa.types.is_decimal(x.type):      # running sums need SUM's width
                x = x.cast(pa.decimal128(38, x.type.scale))
            elif pa.types.is_int64(x.type):       # sum(bigint) is NUMERIC: no wrap-around
                x = x.cast(pa.decimal128(38, 0))
            elif pa.types.is_integer(x.type):
                x = x.cast(pa.int64())
            zero = pa.scalar(decimal.Decimal(0) if pa.types.is_decimal(x.type) else 0, x.type)
            filled = _combine_chunks(pc.fill_null(x, zero))
            if pa.types.is_floating(x.type):
                total = _float_window_sum(filled, row_start, last)
                total = pc.if_else(pa.array(count > 0), total, pa.scalar(None, total.type))
                if f == "sum":
                    return total
                return pc.divide(total, pa.array(np.where(count > 0, count, 1).astype(
                    np.float64)))
            csum = _decimal_cumsum(filled) if pa.types.is_decimal(x.type) else \
                pc.cumulative_sum_checked(filled)
            zero = pa.scalar(decimal.Decimal(0) if pa.types.is_decimal(csum.type) else 0,
                             csum.type)
            prev = pc.if_else(pa.array(row_start > 0),
                              csum.take(pa.array(np.maximum(row_start - 1, 0))), zero)
            total = pc.subtract(csum.take(pa.array(last)), prev)
            total = pc.if_else(pa.array(count > 0), total, pa.scalar(None, total.type))
            if pa.types.is_decimal(total.type):
                total = total.cast(pa.decimal128(38, total.type.scale))
            if f == "sum":
                return total
            if pa.types.is_decimal(total.type):
                total = total.cast(pa.float64())
            return pc.divide(pc.cast(total, pa.float64()),
                             pa.array(np.where(count > 0, count, 1).astype(np.float64)))
        # min / max: running extremes over dense ranks (any sortable type, decimals and
        # strings included); partitions are kept apart by offsetting the ranks so that a
        # plain numpy accumulate restarts at every partition boundary.
        x = _combine_chunks(x)
        ranks = pc.rank(x, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(
            np.int64)                                   # 1..d (NULLs ranked last)
        valid_mask = valid.astype(bool)
        d = int(ranks.max()) if n else 0
        span = d + 2
        nparts = int(part_id[-1]) + 1 if n else 0
        if f == "min":
            r = np.where(valid_mask, ranks, d + 1) + (nparts - 1 - part_id) * span
            run = np.minimum.accumulate(r) - (nparts - 1 - part_id) * span
            none = run == d + 1
        else:
            r = np.where(valid_mask, ranks, 0) + part_id * span
            run = np.maximum.accumulate(r) - part_id * span
            none = run == 0
        where = np.empty(d + 2, dtype=np.int64)
        where[ranks] = pos                              # a row holding each rank
        picked = run[last]
        vals = x.take(pa.array(where[np.clip(picked, 1, max(d, 1))] if n else picked))
        return pc.if_else(pa.array(~none[last]), vals, pa.scalar(None, x.type))

    # -- aggregation -----------------------------------------------------------------------
    def _aggregate(self, node: L.Aggregate) -> pa.Table:
        t = self.run(node.input)
        exprs = [e for _, e in node.groups] + [a.arg for a in node.aggs if a.arg is not None]
        prelude, rewritten = common_subexpressions(exprs)
        items: list[tuple[str, exp.Expression]] = []     # the aggregation's input columns
        it = iter(rewritten)
        for k, _ in node.groups:
            items.append((k, next(it)))
        args: dict[str, L.AggCall] = {}                  # arg column -> its aggregate
        for a in node.aggs:
            if a.arg is not None:
                e = next(it)
                if f"{a.key}$arg" not in {k for k, _ in items}:
                    items.append((f"{a.key}$arg", e))
                    args[f"{a.key}$arg"] = a
        aggs = list({a.key: a for a in node.aggs}.values())
        max_aggs = [a for a in aggs if a.func == "max" and a.arg is not None]

        def column(k: str, e, m: pa.Table):
            """One input column of the aggregation, evaluated over morsel `m`."""
            arg = _chunked(evaluate(self.prepare(e, m), m), m.num_rows)
            a = args.get(k)
            if a is not None:
                _check_aggregate_arg(a.func, a.key, arg.type)
            if a is None or a.distinct:
                arg = hash_key(arg)                      # -0.0 and 0.0 are one value
            if a is not None and a.func == "sum" and pa.types.is_int64(arg.type):
                # sum(bigint) is NUMERIC, as in PostgreSQL: Arrow's int64 sum wraps
                # around silently on overflow
                return arg.cast(pa.decimal128(38, 0))
            return arg

        def prepare(m: pa.Table) -> pa.Table:
            """A morsel of the input -> the aggregation's input columns."""
            for k, e in prelude:      # shared subexpressions once (Q1's price * (1 - disc))
                m = m.append_column(k, _chunked(evaluate(self.prepare(e, m), m), m.num_rows))
            cols = {k: column(k, e, m) for k, e in items}
            for k, a in args.items():
                if (a.func == "count" or a.distinct) and pa.types.is_null(cols[k].type):
                    # count(DISTINCT NULL) has no kernel, and Acero's hash_distinct over a
                    # NULL-typed column crashes the process (sum(DISTINCT NULL) GROUP BY)
                    cols[k] = cols[k].cast(pa.int8())
            for a in max_aggs:        # max over floats is NaN when a NaN is present
                arg = cols[f"{a.key}$arg"]
                cols[f"{a.key}$nan"] = pc.fill_null(pc.is_nan(arg), False) \
                    if pa.types.is_floating(arg.type) else pa.nulls(len(arg), pa.bool_())
            return pa.table(cols)

        gkeys = [k for k, _ in node.groups]
        if not items:               # count(*) only, or nothing: the row count is enough
            return pa.table({a.key: pa.array([t.num_rows], pa.int64()) for a in aggs}) \
                if aggs else empty_rows(1)
        per_list = {a.key for a in aggs if a.distinct and a.func not in _DISTINCT_AGG}
        if not gkeys and (t.num_rows <= _guard.MORSEL_ROWS or per_list):
            # one morsel (the scalar kernels, no plan to set up), or sum/avg(DISTINCT x),
            # which has no scalar plan kernel: the input columns are still evaluated a
            # morsel at a time with a check between, then aggregated whole
            work = prepare(t) if t.num_rows <= _guard.MORSEL_ROWS else \
                pa.Table.from_batches(list(self.source(t, prepare)))
            return pa.table({a.key: _aggregate_all(a, work[f"{a.key}$arg"] if a.arg
                                                   is not None else None, t.num_rows)
                             for a in aggs})
        hashed = "hash_" if gkeys else ""
        spec = []
        for a in aggs:
            if a.key in per_list:     # each group's distinct values, then aggregated
                fn, opts = "distinct", pc.CountOptions(mode="only_valid")
            else:
                fn, opts = _HASH_AGG[a.func] if not a.distinct else _DISTINCT_AGG[a.func]
            spec.append(([] if a.func == "count_star" else f"{a.key}$arg", hashed + fn, opts,
                         a.key))
        for a in max_aggs:
            spec.append((f"{a.key}$nan", hashed + "any", None, f"{a.key}$nan"))
        r = self.aggregate_plan(t, gkeys, spec, prepare)
        out = {**{k: r.column(k) for k in gkeys},
               **{a.key: _aggregate_lists(a, r.column(a.key)) if a.key in per_list
                  else r.column(a.key) for a in aggs}}
        for a in max_aggs:
            if pa.types.is_floating(out[a.key].type):
                nan = pa.scalar(float("nan"), out[a.key].type)
                out[a.key] = pc.if_else(pc.fill_null(r.column(f"{a.key}$nan"), False), nan,
                                        out[a.key])
        return pa.table(out)

    # -- joins -----------------------------------------------------------------------------
    def _join(self, node: L.Join) -> pa.Table:
        if node.kind == "semi" and isinstance(node.left, L.MultiJoin) and node.left_keys:
            # Semi-join reduction: run the subquery side first; if it is smaller than the
            # inner-join input that owns the semi join's left columns, filter that input
            # before the inner joins (TPC-H Q18: 57 order keys against 6M joined rows). The
            # semi join is applied again on top, where it is then cheap.
            right = self.run(node.right)
            left_refs = set().union(*(refs(e) for e in node.left_keys))
            if node.residual is not None:
                left_refs |= refs(node.residual) - set(output_keys(node.right))
            for i, inp in enumerate(node.left.inputs):
                if left_refs <= set(output_keys(inp)):
                    self._prefilter[id(node.left)] = (i, node, right)
                    break
            left = self.run(node.left)
        else:
            left = self.run(node.left)
            right = self.run(node.right)
        lk = [self.eval(e, left) for e in node.left_keys]
        rk = [self.eval(e, right) for e in node.right_keys]
        kind = node.kind
        if node.null_aware:
            if right.num_rows == 0:
                return left
            if any(k.null_count for k in rk):
                return left.slice(0, 0)
            keep = pc.invert(pc.is_null(lk[0]))
            left, lk = left.filter(keep), [k.filter(keep) for k in lk]
        if node.residual is None:
            if not lk:
                if kind in ("semi", "anti"):
                    has = right.num_rows > 0
                    return left if has == (kind == "semi") else left.slice(0, 0)
                return self._cross_outer(left, right, kind)
            return hash_join(left, right, lk, rk, {"left": "left outer", "full": "full outer",
                                                   "semi": "left semi",
                                                   "anti": "left anti"}[kind], self)
        return self._residual_join(node, left, right, lk, rk)

    def _semi_filter(self, node: L.Join, left: pa.Table, right: pa.Table) -> pa.Table:
        lk = [self.eval(e, left) for e in node.left_keys]
        rk = [self.eval(e, right) for e in node.right_keys]
        if node.residual is None:
            return hash_join(left, right, lk, rk, "left semi", self)
        return self._residual_join(node, left, right, lk, rk)

    def _residual_join(self, node, left, right, lk, rk) -> pa.Table:
        """semi/anti/left join with a non-equi condition: inner join on the equi keys (or a
        cross join), residual filter, matched left row numbers, then shape the result."""
        rid = "$rid"
        lt = left.append_column(rid, pa.array(np.arange(left.num_rows, dtype=np.int64)))
        if lk:
            matched = hash_join(lt, right, lk, rk, "inner", self)
        else:
            matched = cross_join(lt, right, self._check_cancel)
        matched = self.filter_table(matched, node.residual)
        if node.kind in ("semi", "anti"):
            ids = pc.unique(matched.column(rid))
            mask = pc.is_in(lt.column(rid), value_set=ids)
            if node.kind == "anti":
                mask = pc.invert(mask)
            return left.filter(mask)
        if node.kind == "left":
            ids = pc.unique(matched.column(rid))
            unmatched = left.filter(pc.invert(pc.is_in(lt.column(rid), value_set=ids)))
            pad = unmatched
            for f in right.schema:
                pad = pad.append_column(f.name, pa.nulls(unmatched.num_rows, f.type))
            return pa.concat_tables([matched.drop_columns([rid]).select(pad.column_names), pad])
        raise SqlError("FULL JOIN with a non-equality condition is not supported", "0A000")

    def _cross_outer(self, left, right, kind) -> pa.Table:
        if kind == "left" and right.num_rows == 0:
            pad = left
            for f in right.schema:
                pad = pad.append_column(f.name, pa.nulls(left.num_rows, f.type))
            return pad
        if kind == "full":
            raise SqlError("FULL JOIN without an equality condition is not supported", "0A000")
        return cross_join(left, right, self._check_cancel)

    def _multijoin(self, node: L.MultiJoin) -> pa.Table:
        inputs = [self.run(i) for i in node.inputs]
        pre = self._prefilter.pop(id(node), None)
        if pre is not None:
            i, semi, right = pre
            if right.num_rows < inputs[i].num_rows:
                t = inputs[i]
                inputs[i] = self._semi_filter(semi, t, right)
                if self.analyze:
                    self.stats.setdefault(id(node), NodeStats()).detail.append(
                        f"semi-join reduction of input [{i}]: {t.num_rows} -> "
                        f"{inputs[i].num_rows} rows")
        owner = {}
        for i, inp in enumerate(node.inputs):
            for k in output_keys(inp):
                owner[k] = i
        needed = self.needed_above(node)
        comps = [_Comp(t, {i}) for i, t in enumerate(inputs)]
        pending = [(c, {owner[k] for k in refs(c) if k in owner}) for c in node.conditions]
        order = []
        # conditions over a single input or none (constant) apply at once
        for c, ins in list(pending):
            if len(ins) <= 1:
                for comp in comps if not ins else [comps[next(iter(ins))]]:
                    comp.table = self.filter_table(comp.table, c)
                pending.remove((c, ins))
        while len(comps) > 1:
            self._check_cancel()
            best = None
            for a, b in itertools.combinations(range(len(comps)), 2):
                A, B = comps[a], comps[b]
                keys = []
                for c, ins in pending:
                    if not ins <= (A.inputs | B.inputs) or ins <= A.inputs or ins <= B.inputs:
                        continue
                    pair = _split_equi(c, A.inputs, B.inputs, owner)
                    if pair is not None:
                        keys.append(pair)
                if not keys:
                    continue
                est = self._estimate(A, B, keys)
                if best is None or est < best[0]:
                    best = (est, a, b, keys)
            if best is None:      # no connected pair: cross join the two smallest
                a, b = sorted(range(len(comps)), key=lambda i: comps[i].table.num_rows)[:2]
                best = (comps[a].table.num_rows * comps[b].table.num_rows, a, b, [])
            _est, a, b, keys = best
            A, B = comps[a], comps[b]
            if A.table.num_rows < B.table.num_rows:    # the smaller side builds the hash table
                A, B = B, A
                keys = [(r, l) for l, r in keys]
            if keys:
                lk = [self.eval(x, A.table) for x, _ in keys]
                rk = [self.eval(y, B.table) for _, y in keys]
                t = hash_join(A.table, B.table, lk, rk, "inner", self)
            else:
                t = cross_join(A.table, B.table, self._check_cancel)
            merged = A.inputs | B.inputs
            rest = []
            for c, ins in pending:
                if not ins <= merged:
                    rest.append((c, ins))
                elif not _is_key_of(c, keys):   # a non-equi condition now fully covered
                    t = self.filter_table(t, c)
            pending = rest
            keep_cols = needed | {k for c, _ in pending for k in refs(c)}
            t = t.select([n for n in t.column_names if n in keep_cols])
            order.append(f"join {sorted(A.inputs)} x {sorted(B.inputs)} -> {t.num_rows} rows")
            comps = [c for i, c in enumerate(comps) if i not in (a, b)] + [_Comp(t, merged)]
        if self.analyze:
            self.stats.setdefault(id(node), NodeStats()).detail.extend(order)
        t = comps[0].table
        for c, _ in pending:
            t = self.filter_table(t, c)
        return t

    def _estimate(self, A: "_Comp", B: "_Comp", keys) -> float:
        na, nb = A.table.num_rows, B.table.num_rows
        if na == 0 or nb == 0:
            return 0.0
        da = db = 1
        for x, y in keys:
            da *= A.ndv(x, self)
            db *= B.ndv(y, self)
        return na * nb / max(min(da, na), min(db, nb), 1)

    def needed_above(self, node: L.Node) -> set[str]:
        """Keys that nodes outside `node`'s subtree (or the output) read."""
        if id(node) in self._needed:
            return self._needed[id(node)]
        inside = {id(n) for n in L.walk(node)}
        needed = set(self._root.keys) if self._root is not None else set()
        roots = [self._root.plan] if self._root is not None else []
        for r in roots:
            for n in _all_nodes(r):
                if id(n) in inside:
                    continue
                for e in n.expressions():
                    needed |= refs(e)
                if isinstance(n, (L.Distinct, L.SetOp)):
                    for c in n.children():
                        needed |= set(output_keys(c))
        if self._root is None:
            needed = set(output_keys(node))
        self._needed[id(node)] = needed
        return needed

    # -- set operations --------------------------------------------------------------------
    def _setop(self, node: L.SetOp) -> pa.Table:
        left = self.run(node.left)
        right = self.run(node.right)
        left, right = _setop_types(left, right, node.keys)
        try:
            both = pa.concat_tables([left, right], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise SqlError(f"UNION/INTERSECT/EXCEPT types cannot be matched: {e}",
                           "42804") from None
        if node.kind == "union":
            return both if node.all else self.distinct(both)
        left, right = both.slice(0, left.num_rows), both.slice(left.num_rows)
        if node.all:
            raise SqlError(f"{node.kind.upper()} ALL is not supported", "0A000")
        left, right = self.distinct(left), self.distinct(right)
        # rows are compared as in DISTINCT (NULL matches NULL), which a hash join does not
        # do: each key is joined as (value with NULL filled in, is NULL)
        keys = [p for k in node.keys for p in _not_distinct_key(left.column(k))]
        rkeys = [p for k in node.keys for p in _not_distinct_key(right.column(k))]
        # the join carries only a row number (Acero refuses NULL-typed payload columns,
        # `SELECT NULL, 1 EXCEPT ...`); the surviving rows are taken from `left`
        rows = pa.table({"$row": pa.array(np.arange(left.num_rows, dtype=np.int64))})
        other = pa.table({"$pad": pa.nulls(right.num_rows, pa.int8())})
        kept = hash_join(rows, other, keys, rkeys,
                         "left semi" if node.kind == "intersect" else "left anti", self)
        return self.take(left, kept.column("$row"))


class _Comp:
    """A MultiJoin component: joined inputs and their result, with cached key NDVs."""

    def __init__(self, table: pa.Table, inputs: set[int]):
        self.table = table
        self.inputs = inputs
        self._ndv: dict[str, int] = {}

    def ndv(self, e: exp.Expression, ex: Executor) -> int:
        k = e.sql()
        v = self._ndv.get(k)
        if v is None:
            v = self._ndv[k] = estimate_ndv(ex.eval(e, self.table))
        return v


NDV_SAMPLE = 65536


def estimate_ndv(arr) -> int:
    """Distinct values of `arr`: exact below NDV_SAMPLE rows, else the GEE estimator over
    an evenly strided sample (sqrt(N/n) * singletons + the other distinct values), which is
    within a small factor either way - enough to order joins."""
    n = len(arr)
    if n <= NDV_SAMPLE:
        return max(1, pc.count_distinct(arr).as_py())
    step = n // NDV_SAMPLE
    sample = arr.take(pa.array(np.arange(0, n, step, dtype=np.int64)))
    counts = pc.value_counts(sample).field("counts")
    d = len(counts)
    f1 = pc.sum(pc.equal(counts, 1)).as_py() or 0
    return max(1, min(n, int((n / len(sample)) ** 0.5 * f1 + (d - f1))))


def _is_key_of(c, keys) -> bool:
    for x, y in keys:
        if isinstance(c, exp.EQ) and ((c.this is x and c.expression is y) or
                                      (c.this is y and c.expression is x) or
                                      (c.this == x and c.expression == y) or
                                      (c.this == y and c.expression == x)):
            return True
    return False


def _split_equi(c, a_inputs, b_inputs, owner):
    if not isinstance(c, exp.EQ) or isinstance(c.expression, (exp.Any, exp.All)) or (
            isinstance(c.expression, exp.Anonymous)
            and c.expression.name.lower() in ("all", "any", "some")):
        return None     # `x = ANY (array)` / ALL (sqlglot: a call) compares each element
    x, y = c.this, c.expression
    rx = {owner.get(k) for k in refs(x)}
    ry = {owner.get(k) for k in refs(y)}
    if not rx or not ry or None in rx or None in ry:
        return None
    if rx <= a_inputs and ry <= b_inputs:
        return x, y
    if ry <= a_inputs and rx <= b_inputs:
        return y, x
    return None


# -- kernels ---------------------------------------------------------------------------------
def common_subexpressions(exprs: list[exp.Expression]
                          ) -> tuple[list[tuple[str, exp.Expression]], list[exp.Expression]]:
    """Computed subexpressions that occur more than once across `exprs` -> (prelude of
    (key, expression) to evaluate once, `exprs` rewritten to read those keys). Largest
    first; a repeat inside an already shared expression is not shared again."""
    counts: dict[str, int] = {}
    nodes: dict[str, exp.Expression] = {}
    for e in exprs:
        for n in e.walk():
            if isinstance(n, (exp.Column, exp.Literal, Const, exp.Paren, exp.Identifier,
                              exp.DataType)) or n.find(SubqueryRef, AvgOf) is not None \
                    or not n.find(exp.Column):
                continue
            k = n.sql()
            counts[k] = counts.get(k, 0) + 1
            nodes.setdefault(k, n)
    shared = sorted((k for k, c in counts.items() if c > 1), key=len, reverse=True)
    prelude: list[tuple[str, exp.Expression]] = []
    keys: dict[str, str] = {}
    for k in shared:
        if any(k in big for big in keys):   # only occurs inside a shared expression
            continue
        keys[k] = f"$cse{len(keys)}"
    if not keys:
        return [], exprs
    for k, key in keys.items():
        prelude.append((key, nodes[k]))

    def sub(n):
        if not isinstance(n, (exp.Column, exp.Literal)):
            key = keys.get(n.sql())
            if key is not None:
                return keycol(key)
        return n
    return prelude, [e.transform(sub) for e in exprs]



def _decimal_cumsum(x: pa.Array) -> pa.Array:
    """Running sum of a decimal128 array without NULLs (Arrow has no decimal kernel): on the
    unscaled integers - int64 when every running total fits, else Python ints (exact)."""
    n = len(x)
    words = np.frombuffer(x.buffers()[1], dtype=np.int64,
                          count=2 * (x.offset + n))[2 * x.offset:].reshape(n, 2) if n else \
        np.zeros((0, 2), dtype=np.int64)
    lo, hi = words[:, 0], words[:, 1]
    fits = bool(np.all(hi == (lo >> 63)))           # every value is an int64
    if fits:
        approx = np.cumsum(lo.astype(np.float64))
        fits = bool(np.all(np.abs(approx) < 2.0 ** 62))
    if fits:
        total = np.cumsum(lo)
        data = np.empty(2 * n, dtype=np.int64)
        data[0::2] = total
        data[1::2] = total >> 63
        # |total| < 2^62 has at most 19 digits: a label that leaves room to subtract
        return pa.Array.from_buffers(pa.decimal128(max(19, x.type.scale + 1), x.type.scale),
                                     n, [None, pa.py_buffer(data)])
    # Rare (totals beyond 2^62 unscaled): exact Python arithmetic, one step per row.
    acc, out = decimal.Decimal(0), []
    for v in x.to_pylist():
        acc += v
        out.append(acc)
    try:
        return pa.array(out, pa.decimal128(37, x.type.scale))
    except (pa.ArrowInvalid, OverflowError):
        raise SqlError("numeric field overflow in a window sum", "22003") from None


def _sortable_numpy(a) -> np.ndarray:
    """A numeric/temporal column as numbers that order as its values do (NULLs as 0:
    the NULL flag column sorts them)."""
    a = _combine_chunks(a)
    if not (pa.types.is_integer(a.type) or pa.types.is_floating(a.type)):
        a = a.view(pa.int32() if a.type.bit_width == 32 else pa.int64())
    return pc.fill_null(a, 0).to_numpy(zero_copy_only=False)


def _combine_chunks(a):
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def _add_sort_key(work: dict, sort_keys: list, name: str, arr, k: L.SortKey) -> None:
    """Sort columns for one ORDER BY key with PostgreSQL's NULL order (last for ASC, first
    for DESC, unless NULLS FIRST/LAST): a NULL flag column first when there are NULLs."""
    nulls_first = k.nulls_first if k.nulls_first is not None else k.desc
    if arr.null_count:
        work[f"{name}$null"] = pc.is_null(arr)
        sort_keys.append((f"{name}$null", "descending" if nulls_first else "ascending"))
    if pa.types.is_floating(arr.type) and pc.any(pc.is_nan(arr)).as_py():
        # NaN is above every other float (PostgreSQL); Arrow places NaNs at the end
        # whatever the direction, so a NaN flag orders them first
        work[f"{name}$nan"] = pc.fill_null(pc.is_nan(arr), False)
        sort_keys.append((f"{name}$nan", "descending" if k.desc else "ascending"))
    if isinstance(arr.type, ArrayType):
        arr = _array_rank(arr)
    if pa.types.is_interval(arr.type):
        # Arrow cannot sort MonthDayNano; PostgreSQL orders intervals by their span with a
        # month as 30 days: (whole days, nanoseconds within the day) after normalising
        days, nanos = _interval_span(arr)
        work[f"{name}$days"] = days
        sort_keys.append((f"{name}$days", "descending" if k.desc else "ascending"))
        arr = nanos
    work[name] = arr
    sort_keys.append((name, "descending" if k.desc else "ascending"))


_DAY_NS = 86_400_000_000_000


def _array_rank(arr) -> pa.Array:
    """Arrays (stored as their text) -> int64 ranks in PostgreSQL's array order: element
    by element in the element type's order, NULL elements after the others, a prefix
    before the longer array. A Python loop per distinct array: Arrow cannot sort lists,
    and arrays as sort keys are rare and short."""
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    vt = arr.type.value_type
    if pa.types.is_integer(vt) or pa.types.is_floating(vt) or pa.types.is_decimal(vt):
        conv = float if pa.types.is_floating(vt) else (
            decimal.Decimal if pa.types.is_decimal(vt) else int)
    else:
        conv = str

    def key(text: str) -> tuple:
        return tuple((1, 0) if e is None else (0, conv(e)) for e in parse_array_literal(text))
    dictionary = pc.unique(a.storage)
    texts = [t for t in dictionary.to_pylist() if t is not None]
    rank = {t: i for i, t in enumerate(sorted(texts, key=key))}
    ranks = pa.array([rank.get(t) for t in dictionary.to_pylist()], pa.int64())
    return ranks.take(pc.index_in(a.storage, value_set=dictionary))


def _interval_span(arr) -> tuple[pa.Array, pa.Array]:
    """MonthDayNano intervals -> (days, ns within the day) int64 arrays, months as 30 days:
    ordering by the pair is PostgreSQL's interval order (a span in int64 nanoseconds would
    overflow after ~292 years). Read from the values buffer (16 bytes a value), vectorised."""
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    rec = np.frombuffer(a.buffers()[1], dtype=np.dtype(
        [("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]))[a.offset:a.offset + len(a)]
    nanos = rec["nanos"]
    days = rec["months"].astype(np.int64) * 30 + rec["days"] + nanos // _DAY_NS
    return pa.array(days), pa.array(nanos % _DAY_NS)


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


def _changes(a) -> np.ndarray:
    """For sorted values: True where a row differs from the previous one (NULLs equal)."""
    a = _combine_chunks(a)
    if len(a) < 2:
        return np.zeros(max(len(a) - 1, 0), dtype=bool)
    cur, prev = a.slice(1), a.slice(0, len(a) - 1)
    diff = pc.fill_null(pc.not_equal(cur, prev), True)
    nul_c, nul_p = pc.is_null(cur), pc.is_null(prev)
    same_null = pc.and_(nul_c, nul_p)
    diff = pc.and_(diff, pc.invert(same_null))
    return diff.to_numpy(zero_copy_only=False)


def _table_nbytes(t) -> int:
    """Bytes of Arrow buffers `t` keeps alive (shared buffers counted once per column)."""
    try:
        return t.get_total_buffer_size()
    except (AttributeError, pa.ArrowException):
        return 0


def _array_nbytes(a) -> int:
    if isinstance(a, pa.Scalar):
        return 0
    try:
        return a.get_total_buffer_size()
    except (AttributeError, pa.ArrowException):
        return a.nbytes


def _join_parts(parts: list):
    """Per-morsel results -> one ChunkedArray (a morsel typed NULL, e.g. all-NULL CASE
    arms, takes the others' type)."""
    chunks = [c for p in parts for c in (p.chunks if isinstance(p, pa.ChunkedArray) else
                                         [p])]
    types = {c.type for c in chunks}
    if len(types) > 1:
        target = next((c.type for c in chunks if not pa.types.is_null(c.type)), chunks[0].type)
        chunks = [c if c.type == target else c.cast(target) for c in chunks]
        types = {target}
    return pa.chunked_array(chunks, type=types.pop() if types else pa.null())


def _digits(col, typ: pa.DataType) -> int:
    """The decimal precision the values of DECIMAL column `col` need (at least scale + 1)."""
    mm = pc.min_max(col)
    big = max((abs(v.as_py()) for v in (mm["min"], mm["max"]) if v.is_valid),
              default=decimal.Decimal(0))
    return min(38, max(len(str(int(big.scaleb(typ.scale)))), typ.scale + 1))


def _float_window_sum(x: pa.Array, row_start: np.ndarray, last: np.ndarray) -> pa.Array:
    """Sums of x[row_start[i] .. last[i]] by differences of one cumulative sum, with the
    non-finite values counted apart: an infinity or NaN in one partition must not turn the
    differences of every later row into NaN (inf - inf)."""
    v = x.to_numpy(zero_copy_only=False).astype(np.float64)
    finite = np.isfinite(v)

    def window(c: np.ndarray) -> np.ndarray:
        c = np.cumsum(c)
        return c[last] - np.where(row_start > 0, c[np.maximum(row_start - 1, 0)], 0)
    total = window(np.where(finite, v, 0.0))
    pos, neg, nan = (window(m.astype(np.int64)) for m in (v == np.inf, v == -np.inf,
                                                           np.isnan(v)))
    total = np.where(pos > 0, np.inf, total)
    total = np.where(neg > 0, -np.inf, total)
    total = np.where((nan > 0) | ((pos > 0) & (neg > 0)), np.nan, total)
    return pa.array(total).cast(x.type)


def _not_distinct_key(a) -> tuple:
    """A join key column as (values with NULLs replaced, is NULL): equal pairs mean IS NOT
    DISTINCT FROM. The replacement is one fixed value of the type (the same on both sides
    of the join; only the flag tells NULLs apart)."""
    a = _combine_chunks(a)
    if pa.types.is_null(a.type):
        a = a.cast(pa.int8())
    flags = pc.is_null(a)
    if a.null_count == 0:
        return a, flags
    for seed in (pa.scalar(0, pa.int32()), pa.scalar(decimal.Decimal(0)),
                 pa.scalar(0, pa.int64()), pa.scalar(""),
                 pa.scalar(b"")):      # a zero / empty value of the type (date, timestamp..)
        try:
            return pc.fill_null(a, seed.cast(a.type)), flags
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    raise SqlError(f"cannot compare values of type {a.type} in a set operation", "42883")


def _setop_types(left: pa.Table, right: pa.Table, keys: list[str]
                 ) -> tuple[pa.Table, pa.Table]:
    """Both inputs of a set operation renamed to `keys`, each column pair cast to its common
    type by the expression rules (PostgreSQL's: int and numeric give numeric, numeric and
    double give double), not Arrow's promotion; 42804 when there is none."""
    from planner.expr import _cast, _supertype
    lcols, rcols = [], []
    for a, b in zip(left.columns, right.columns):
        if a.type != b.type and not pa.types.is_null(a.type) and not pa.types.is_null(b.type):
            t = _supertype([a.type, b.type])
            if t is None:
                raise SqlError(f"UNION/INTERSECT/EXCEPT types {a.type} and {b.type} cannot be "
                               "matched", "42804")
            a = a if a.type == t else _cast(_combine_chunks(a), t, None)
            b = b if b.type == t else _cast(_combine_chunks(b), t, None)
        lcols.append(a)
        rcols.append(b)
    return (pa.Table.from_arrays(lcols, names=keys), pa.Table.from_arrays(rcols, names=keys))


def _chunked(a, n: int):
    if isinstance(a, pa.Scalar):
        return pa.repeat(a, n)
    return a


def _concat_promote(parts: list, name: str) -> pa.Array:
    """One VALUES column from its rows' values: the common type by the expression rules
    (1 and 1.5 give DECIMAL, as in PostgreSQL), 42804 when there is none."""
    from planner.expr import _cast, _supertype
    types = [p.type for p in parts if not pa.types.is_null(p.type)]
    target = _supertype(types) if types else pa.null()
    if target is None:
        raise SqlError("VALUES types " + " and ".join(sorted({str(t) for t in types}))
                       + " cannot be matched", "42804")
    try:
        cast = [p if p.type == target else _cast(p, target, None) for p in parts]
        return pa.chunked_array([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
                                 for c in cast], type=target).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        raise SqlError("VALUES types cannot be matched", "42804") from None


def hash_key(a):
    """A column as a hash key (GROUP BY, DISTINCT, join keys): floats get -0.0 -> 0.0, since
    SQL has -0.0 = 0.0 but Arrow's hashing tells them apart."""
    if pa.types.is_floating(a.type):
        return pc.add(a, pa.scalar(0.0, a.type))
    return a


def _hash_keys(t: pa.Table) -> pa.Table:
    """Every column of `t` as a hash key (floats: -0.0 -> 0.0)."""
    return pa.Table.from_arrays([hash_key(c) for c in t.columns], names=t.column_names)


def distinct(t: pa.Table) -> pa.Table:
    if t.num_columns == 0:
        return empty_rows(min(t.num_rows, 1))
    if any(pa.types.is_floating(f.type) for f in t.schema):
        t = _hash_keys(t)
    r = t.group_by(t.column_names, use_threads=True).aggregate([])
    return r.select(t.column_names)


def _common_key_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    if a == b:
        return None
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        return pa.int64()
    if pa.types.is_decimal(a) and pa.types.is_decimal(b) or \
            (pa.types.is_decimal(a) and pa.types.is_integer(b)) or \
            (pa.types.is_integer(a) and pa.types.is_decimal(b)):
        def ps(t):
            return (t.precision, t.scale) if pa.types.is_decimal(t) else (19, 0)
        (p1, s1), (p2, s2) = ps(a), ps(b)
        s = max(s1, s2)
        p = min(38, max(p1 - s1, p2 - s2) + s)
        return pa.decimal128(p, s)
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        return pa.float64()
    if (pa.types.is_string(a) or pa.types.is_large_string(a)) and \
            (pa.types.is_string(b) or pa.types.is_large_string(b)):
        return pa.string()
    if pa.types.is_date(a) and pa.types.is_timestamp(b):
        return b
    if pa.types.is_timestamp(a) and pa.types.is_date(b):
        return a
    return None


def hash_join(left: pa.Table, right: pa.Table, lk: list, rk: list, join_type: str,
              ex: Executor | None = None) -> pa.Table:
    """Acero hash join of `left` and `right` on evaluated key arrays `lk` / `rk`. With an
    executor `ex`, both inputs stream into the plan as morsels and the output is read
    batch by batch, so its guard is consulted while the hash table is built, while it is
    probed and while the output grows."""
    ln, rn = [], []
    for i, (a, b) in enumerate(zip(lk, rk)):
        a, b = _chunked(a, left.num_rows), _chunked(b, right.num_rows)
        common = _common_key_type(a.type, b.type)
        if common is not None:
            # integers beyond 2**53 compared with a double round, as in PostgreSQL (int8 =
            # float8 converts the integer); Arrow's safe cast would refuse them
            unsafe = pa.types.is_floating(common)
            a, b = a.cast(common, safe=not unsafe), b.cast(common, safe=not unsafe)
        elif a.type != b.type:
            raise SqlError(f"cannot join on {a.type} = {b.type}", "42804")
        a, b = hash_key(a), hash_key(b)
        left = left.append_column(f"$lk{i}", a)
        right = right.append_column(f"$rk{i}", b)
        ln.append(f"$lk{i}")
        rn.append(f"$rk{i}")
    if left.num_columns == len(ln) and join_type in ("inner", "left outer"):
        left = left.append_column("$lpad", pa.nulls(left.num_rows, pa.int8()))
    if right.num_columns == len(rn) and join_type in ("inner", "left outer", "full outer"):
        right = right.append_column("$rpad", pa.nulls(right.num_rows, pa.int8()))
    # Acero builds its hash table on the right input: keep the smaller side there.
    if right.num_rows > left.num_rows and join_type in _SWAPPED:
        left, right, ln, rn, join_type = right, left, rn, ln, _SWAPPED[join_type]
    fanout = right.num_rows / max(1, estimate_ndv(right.column(rn[0]))) \
        if ex is not None and right.num_rows else 1.0
    if ex is None or (max(left.num_rows, right.num_rows) <= _guard.MORSEL_ROWS and
                      left.num_rows * max(fanout, 1.0) <= 4 * _guard.MORSEL_ROWS):
        # small inputs and output (a few morsels of work): one Acero call, no streaming
        out = left.join(right, keys=ln, right_keys=rn, join_type=join_type,
                        coalesce_keys=False, use_threads=True)
    else:
        from pyarrow import acero

        def src(t, rows=None):
            return acero.Declaration("record_batch_reader_source",
                                     acero.RecordBatchReaderSourceNodeOptions(
                                         ex.source(t, rows=rows)))
        # One probe batch is one uninterruptible Acero task, and its work is its output:
        # with F build rows per key, probe morsels of JOIN_OUTPUT_ROWS / F rows keep a
        # task to about JOIN_OUTPUT_ROWS output rows (a self-join on a 2-valued key makes
        # thousands of rows of every probe row).
        probe_rows = max(64, min(_guard.MORSEL_ROWS, int(JOIN_OUTPUT_ROWS / max(fanout, 1))))
        decl = acero.Declaration("hashjoin", acero.HashJoinNodeOptions(join_type, ln, rn),
                                 inputs=[src(left, probe_rows), src(right)])
        out = ex.collect(decl.to_reader(use_threads=True))
    drop = [c for c in out.column_names if c.startswith(("$lk", "$rk", "$lpad", "$rpad"))]
    return out.drop_columns(drop)


JOIN_OUTPUT_ROWS = 1 << 17      # output rows one probe morsel may make, about

_SWAPPED = {"inner": "inner", "left semi": "right semi", "left anti": "right anti",
            "left outer": "right outer"}


CROSS_JOIN_CHUNK_ROWS = 1 << 20


def cross_join(left: pa.Table, right: pa.Table, check_cancel=None) -> pa.Table:
    """Every left row with every right row, built in chunks of about a million output rows
    (a cancel is honoured between chunks); 54000 beyond MAX_CROSS_JOIN_ROWS."""
    n = left.num_rows * right.num_rows
    if n > MAX_CROSS_JOIN_ROWS:
        raise SqlError(f"a cross join of {left.num_rows} x {right.num_rows} rows is too large",
                       "54000")
    step = max(1, CROSS_JOIN_CHUNK_ROWS // max(right.num_rows, 1))
    parts = []
    for start in range(0, max(left.num_rows, 1), step):
        if check_cancel is not None:
            check_cancel()
        rows = min(step, left.num_rows - start)   # (slicing a column-less table does not
        chunk = left.slice(start, rows)           # clamp its length: count explicitly)
        m = rows * right.num_rows
        li = np.repeat(np.arange(rows, dtype=np.int64), right.num_rows)
        ri = np.tile(np.arange(right.num_rows, dtype=np.int64), rows)
        out = chunk.take(pa.array(li)) if chunk.num_columns else empty_rows(m)
        rt = right.take(pa.array(ri))
        for name in rt.column_names:
            out = out.append_column(name, rt.column(name))
        if isinstance(check_cancel, QueryGuard):
            check_cancel.charge(_table_nbytes(out))
        parts.append(out)
    return pa.concat_tables(parts) if len(parts) != 1 else parts[0]


_HASH_AGG = {
    "sum": ("sum", None), "min": ("min", None), "max": ("max", None),
    "count": ("count", pc.CountOptions(mode="only_valid")), "count_star": ("count_all", None),
    "stddev": ("stddev", pc.VarianceOptions(ddof=1)),
    "stddev_pop": ("stddev", pc.VarianceOptions(ddof=0)),
    "variance": ("variance", pc.VarianceOptions(ddof=1)),
    "variance_pop": ("variance", pc.VarianceOptions(ddof=0)),
    "bool_and": ("all", None), "bool_or": ("any", None),
}
_DISTINCT_AGG = {
    "count": ("count_distinct", pc.CountOptions(mode="only_valid")),
    "min": ("min", None), "max": ("max", None),
}


def _aggregate_lists(a: L.AggCall, lists) -> pa.Array:
    """`a` (non-DISTINCT form) over each list of a list column (hash_distinct's output):
    one vectorised group_by over the flattened values keyed by list index; an empty list
    (a group without non-NULL values) gives NULL."""
    lists = _combine_chunks(lists)
    n = len(lists)
    fn, opts = _HASH_AGG[a.func]
    flat = pa.table({"i": pc.list_parent_indices(lists), "v": pc.list_flatten(lists)})
    r = flat.group_by("i").aggregate([("v", fn, opts) if opts else ("v", fn)])
    pos = pc.index_in(pa.array(np.arange(n)), r.column("i"))
    return pc.take(r.column(f"v_{fn}"), pos)


_NUMERIC_AGGREGATES = {"sum", "avg", "stddev", "stddev_pop", "variance", "variance_pop"}


def _check_aggregate_arg(func: str, key: str, typ: pa.DataType) -> None:
    """42883 as PostgreSQL words it for an aggregate over a type it has no form for
    (`sum(text)`, `bool_and(integer)`); Arrow's kernels would fail with their own text."""
    if func in _NUMERIC_AGGREGATES:
        ok = pa.types.is_integer(typ) or pa.types.is_floating(typ) or \
            pa.types.is_decimal(typ) or pa.types.is_null(typ)
    elif func in ("bool_and", "bool_or"):
        ok = pa.types.is_boolean(typ) or pa.types.is_null(typ)
    else:
        return
    if not ok:
        from planner.expr import _pg_name
        name = "avg" if key.endswith(".sum") else func    # avg is bound as sum / count
        raise SqlError(f"function {name}({_pg_name(typ)}) does not exist", "42883",
                       hint="No function matches the given name and argument types. You "
                            "might need to add explicit type casts.")


def _aggregate_all(a: L.AggCall, arr, n: int) -> pa.Array:
    """One aggregate over a whole column (no GROUP BY) -> a one-element array."""
    if a.distinct and a.func not in _DISTINCT_AGG:     # sum/avg(DISTINCT x), ...
        arr = pc.unique(_combine_chunks(arr))
    if a.func == "count_star":
        return pa.array([n], pa.int64())
    if a.func == "count":
        v = pc.count_distinct(arr, mode="only_valid") if a.distinct else \
            pc.count(arr, mode="only_valid")
        return pa.array([v.as_py()], pa.int64())
    if a.func == "sum":
        s = pc.sum(arr, min_count=1)
        return pa.array([s.as_py()], s.type)
    if a.func in ("min", "max"):
        s = pc.min_max(arr)[a.func]
        if a.func == "max" and pa.types.is_floating(arr.type) and \
                pc.any(pc.is_nan(arr)).as_py():
            return pa.array([float("nan")], arr.type)      # NaN is the largest float
        return pa.array([s.as_py()], arr.type)
    if a.func in ("stddev", "stddev_pop", "variance", "variance_pop"):
        ddof = 0 if a.func.endswith("_pop") else 1
        f = pc.stddev if a.func.startswith("stddev") else pc.variance
        s = f(arr, ddof=ddof, min_count=1)
        return pa.array([s.as_py()], pa.float64())
    if a.func in ("bool_and", "bool_or"):
        s = (pc.all if a.func == "bool_and" else pc.any)(arr, min_count=1)
        return pa.array([s.as_py()], pa.bool_())
    raise SqlError(f"aggregate {a.func} is not supported", "0A000")


__all__ = ["Executor", "cross_join", "distinct", "empty_rows", "hash_join"]
