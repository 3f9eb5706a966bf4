"""The TPC-H test oracle: DuckDB's answers on the same parquet, and a tolerant comparison.

    parquet dir ──duckdb views──> duckdb_answer(dir, n) ──┐
                                                         ├── compare(ours, expected, ...)
    kudusql ──cursor.fetch_arrow_table()──> ours ─────────┘        -> list of mismatches

DuckDB is a test and benchmark dependency only (the `test` extra), never on the product's
query path: it is imported inside the functions that use it.

Comparison rules (`compare`):
- the same number of rows and of columns; columns are matched by position, not name (our
  engine may name `sum(l_quantity)` differently);
- numbers of any type (ints, decimals, floats) compare as floats, equal when within a
  relative 1e-6 or an absolute 0.01 (the spec allows rounding to the cent);
  dates, timestamps and strings compare exactly (a `datetime` never equals a `date`);
  NULL equals only NULL;
- row order: `ordered_by_query=False` compares multisets (both sides sorted by all
  columns); `ordered_by_query=True` compares position by position, except that rows tying
  on the ORDER BY columns (`order_keys`, positions in the result) may come in any order:
  each run of tying rows is sorted by all columns on both sides before the comparison.

Which mode a query needs (`compare_query`): every TPC-H query with an ORDER BY whose
columns are all in its select list is compared in order with ties allowed, so a wrong
ORDER BY is caught; without `order_keys` (say the sqlglot parse failed) a query with
LIMIT is still compared in order and the others as multisets.

Not handled: a LIMIT that cuts through a run of ties may legitimately keep different
rows; none of the 22 queries does so on tpchgen data at the scale factors we test.

`geometric_mean(ratios)`: the summary of per-query time ratios (the command, the benchmark).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tpch.data import parquet_files
from tpch.queries import has_limit, order_keys, query

REL_TOL = 1e-6
ABS_TOL = 0.01
MAX_REPORTED = 20


# -- DuckDB ---------------------------------------------------------------------------------

def duckdb_connect(parquet_dir: str, threads: int | None = None):
    """An in-memory DuckDB connection with one view per TPC-H table over the parquet."""
    import duckdb  # test/bench-only dependency

    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")    # (its bar filled the bench's log)
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    for t, paths in parquet_files(parquet_dir).items():
        files = ", ".join("'" + f.replace("'", "''") + "'" for f in paths)
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet([{files}])")
    return con


def duckdb_run(con, sql: str) -> pa.Table:
    """Run `sql` on a DuckDB connection, the result as an Arrow table."""
    rel = con.sql(sql)
    to_table = getattr(rel, "to_arrow_table", None) or rel.arrow  # duckdb 2.x / 1.x
    return to_table()


def duckdb_answer(parquet_dir: str, n: int, con=None) -> pa.Table:
    """DuckDB's answer to TPC-H query `n` over the parquet files in `parquet_dir`
    (pass `con` from `duckdb_connect` to reuse the views across queries)."""
    own = con is None
    if own:
        con = duckdb_connect(parquet_dir)
    try:
        return duckdb_run(con, query(n))
    finally:
        if own:
            con.close()


# -- comparison -----------------------------------------------------------------------------

def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)


def _norm(v: Any) -> Any:
    """A Python value ready for comparison: decimals become floats (ints stay ints, so
    that reports show them as they are)."""
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, memoryview):
        return bytes(v)
    return v


def _rows(table: pa.Table) -> list[tuple]:
    cols = [[_norm(v) for v in c.to_pylist()] for c in table.columns]
    return list(zip(*cols)) if cols else [() for _ in range(table.num_rows)]


def _sort_value(v: Any) -> tuple:
    """A total order over one column's values: NULLs first, numbers rounded to 9
    significant digits so that tolerated differences rarely change the order."""
    if v is None:
        return (0, 0, "")
    if _is_number(v):
        if math.isnan(v):
            return (1, 1, "")
        return (1, 0, float(f"{float(v):.9g}"))
    if isinstance(v, _dt.datetime):
        return (2, 0, v.isoformat())
    if isinstance(v, _dt.date):
        return (2, 1, v.isoformat())
    return (3, type(v).__name__, v)


def _sort_key(ncols: int, *row_lists: Sequence[tuple]):
    """A sort key over whole rows, the same for both sides: every column, numeric columns
    after the others (so a tolerated difference in a sum cannot reorder rows whose
    string or date columns differ)."""
    numeric = [any(_is_number(r[i]) for rows in row_lists for r in rows)
               for i in range(ncols)]
    cols = [i for i in range(ncols) if not numeric[i]] + [i for i in range(ncols) if numeric[i]]
    return lambda r: tuple(_sort_value(r[i]) for i in cols)


def _canonical_ties(rows: list[tuple], keys: Sequence[int], sort_key) -> list[tuple]:
    """Sort each run of consecutive rows with equal ORDER BY values by all columns
    (equal as `compare` sees it: a sum computed in floating point still ties)."""
    out: list[tuple] = []
    i = 0
    while i < len(rows):
        j = i + 1
        while j < len(rows) and all(_equal(rows[j][c], rows[i][c]) for c in keys):
            j += 1
        out.extend(sorted(rows[i:j], key=sort_key) if j - i > 1 else rows[i:j])
        i = j
    return out


def _equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if _is_number(a) and _is_number(b):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if _is_number(a) or _is_number(b):
        return False  # a number against a string, a date...
    return type(a) is type(b) and a == b


def compare(ours: pa.Table, expected: pa.Table, ordered_by_query: bool,
            order_keys: Sequence[int] | None = None) -> list[str]:
    """Human-readable differences between two answers; an empty list means equal.

    `ordered_by_query`: the query's ORDER BY fixes the order, compare position by
    position; `order_keys` (result column positions of the ORDER BY) lets rows that tie
    on them come in any order. Otherwise both sides are compared as multisets.
    """
    problems: list[str] = []
    names = expected.column_names
    ncols = len(names)
    if ours.num_columns != ncols:
        return [f"column count: got {ours.num_columns} {ours.column_names}, "
                + f"expected {ncols} {names}"]
    got_rows, exp_rows = _rows(ours), _rows(expected)
    key = _sort_key(ncols, got_rows, exp_rows)
    if ordered_by_query:
        if order_keys:
            got_rows = _canonical_ties(got_rows, order_keys, key)
            exp_rows = _canonical_ties(exp_rows, order_keys, key)
    else:
        got_rows, exp_rows = sorted(got_rows, key=key), sorted(exp_rows, key=key)

    if len(got_rows) != len(exp_rows):
        problems.append(f"row count: got {len(got_rows)}, expected {len(exp_rows)}")
        problems.extend(_multiset_diff(got_rows, exp_rows, key))
        return problems[:MAX_REPORTED + 1]

    mism = 0
    for i, (g, e) in enumerate(zip(got_rows, exp_rows)):
        bad = [c for c in range(ncols) if not _equal(g[c], e[c])]
        if not bad:
            continue
        mism += 1
        if len(problems) < MAX_REPORTED:
            detail = "; ".join(f"{names[c]} (col {c + 1}): got {g[c]!r}, expected "
                               f"{e[c]!r}" for c in bad)
            problems.append(f"row {i + 1}: {detail}")
    if mism > MAX_REPORTED:
        problems.append(f"... {mism - MAX_REPORTED} more differing rows")
    if mism and ordered_by_query and not _multiset_diff(got_rows, exp_rows, key):
        problems.insert(0, "same rows, wrong order")
    return problems


def _multiset_diff(got: list[tuple], exp: list[tuple], key, limit: int = 5) -> list[str]:
    """Rows of one side without an equal row on the other (tolerant equality): a merge of
    both sides sorted by `key`."""
    g_sorted, e_sorted = sorted(got, key=key), sorted(exp, key=key)
    extra, missing = [], []
    i = j = 0
    while i < len(g_sorted) and j < len(e_sorted):
        g, e = g_sorted[i], e_sorted[j]
        if all(_equal(a, b) for a, b in zip(g, e)):
            i += 1
            j += 1
            continue
        if key(g) < key(e):
            extra.append(g)
            i += 1
        else:
            missing.append(e)
            j += 1
    extra.extend(g_sorted[i:])
    missing.extend(e_sorted[j:])
    out = [f"missing row: {r}" for r in missing[:limit]]
    if len(missing) > limit:
        out.append(f"... {len(missing) - limit} more missing rows")
    out += [f"unexpected row: {r}" for r in extra[:limit]]
    if len(extra) > limit:
        out.append(f"... {len(extra) - limit} more unexpected rows")
    return out


def compare_query(n: int, ours: pa.Table, expected: pa.Table) -> list[str]:
    """`compare` with the row-order rule of TPC-H query `n` (see the module doc)."""
    keys = order_keys(n)
    if keys is not None:
        return compare(ours, expected, ordered_by_query=True, order_keys=keys)
    return compare(ours, expected, ordered_by_query=has_limit(n))


def geometric_mean(ratios) -> tuple[float | None, int]:
    """(geometric mean, count) of the positive, finite ratios; (None, 0) without any."""
    good = [r for r in ratios if r > 0 and math.isfinite(r)]
    return (math.exp(sum(math.log(r) for r in good) / len(good)) if good else None), len(good)
