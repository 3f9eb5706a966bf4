"""Scan predicates on FLOAT / DOUBLE columns follow SQL's total order, not IEEE's.

PostgreSQL (and DuckDB) order floats with -0.0 = 0.0, NaN = NaN and NaN above every other
value; IEEE comparisons make every comparison with NaN false, Arrow's hashed IN tells -0.0
from 0.0, and a page's min/max leave NaN out. Before engine/tablet/scan_spec.py corrected
all three, `WHERE d > 1` pushed into a scan lost every NaN row, a wrong answer over SQL.

Two generated checks: the engine's scan against a model of SQL's order on random tablets
(rows in the MemRowSet, in several small pages of flushed DiskRowSets, updated through the
DeltaMemStore) and random predicates with NaN, +-0.0, +-inf and NULL bounds; and SQL
through kudusql against DuckDB on the same rows.
"""

from __future__ import annotations

import math
import random

import pytest

from engine.clock import LogicalClock
from engine.config import TabletConfig
from engine.schema import ColumnSchema, Schema
from engine.tablet import ColumnPredicate, Tablet
from engine.types import DataType

NAN, INF = float("nan"), float("inf")
POOL = [NAN, -0.0, 0.0, INF, -INF, 1.0, -1.0, 1.5, 2.0, None]
BOUNDS = [NAN, -0.0, 0.0, INF, -INF, 1.0, 1.5, -1.0, 3.0]


def _order(v: float) -> tuple:
    """SQL's total order on non-NULL floats: NaN above everything, -0.0 equal to 0.0."""
    return (1, 0.0) if math.isnan(v) else (0, v + 0.0)


def _model_matches(p: ColumnPredicate, v) -> bool:
    if v is None:
        return False
    x = _order(v)
    if p.kind == "in":
        return any(w is not None and _order(w) == x for w in p.values)
    if p.lower is not None:
        lo = _order(p.lower)
        if x < lo or (x == lo and not p.lower_inclusive):
            return False
    if p.upper is not None:
        hi = _order(p.upper)
        if x > hi or (x == hi and not p.upper_inclusive):
            return False
    return True


def _random_pred(rng: random.Random) -> ColumnPredicate:
    r = rng.random()
    if r < 0.2:
        return ColumnPredicate.in_list("d", rng.sample(BOUNDS + [None], rng.randint(0, 3)))
    if r < 0.35:
        return ColumnPredicate.equal("d", rng.choice(BOUNDS))
    lo = rng.choice(BOUNDS + [None, None])
    hi = rng.choice(BOUNDS + [None, None])
    return ColumnPredicate.range("d", lo, hi, rng.random() < 0.5, rng.random() < 0.5)


def _tablet(tmp_path, rng: random.Random) -> tuple[Tablet, dict]:
    schema = Schema([ColumnSchema("k", DataType.INT32),
                     ColumnSchema("d", DataType.DOUBLE, nullable=True)], key=["k"])
    cfg = TabletConfig(page_rows=4, fsync=False, wal_sync="never")
    t = Tablet.create(str(tmp_path / f"t{rng.random()}"), schema, cfg, LogicalClock())
    model: dict[int, float | None] = {}
    k = 0
    for _ in range(rng.randint(1, 4)):
        # a few pages whose values cluster, so a page's min/max can rule pages in and out
        rows = []
        for _ in range(rng.randint(1, 12)):
            pool = rng.choice([POOL, POOL[:4], [1.0, 2.0, NAN], [-1.0, -0.0]])
            rows.append({"k": k, "d": rng.choice(pool)})
            k += 1
        t.insert(rows)
        model.update({r["k"]: r["d"] for r in rows})
        if rng.random() < 0.7:
            t.flush_mrs()
    for key in rng.sample(sorted(model), min(len(model), rng.randint(0, 4))):
        v = rng.choice(POOL)
        t.update([{"k": key, "d": v}])
        model[key] = v
    return t, model


@pytest.mark.parametrize("seed", range(12))
def test_scan_predicates_follow_sql_float_order(tmp_path, seed):
    rng = random.Random(seed)
    t, model = _tablet(tmp_path, rng)
    try:
        for _ in range(60):
            preds = [_random_pred(rng) for _ in range(rng.choice([1, 1, 2]))]
            got = sorted(t.scan_table(["k"], predicates=preds).column("k").to_pylist())
            want = sorted(k for k, v in model.items()
                          if all(_model_matches(p, v) for p in preds))
            assert got == want, (preds, {k: model[k] for k in sorted(set(got) ^ set(want))})
    finally:
        t.close()


def _literal(v: float) -> str:
    if math.isnan(v):
        return "CAST('NaN' AS DOUBLE)"
    if math.isinf(v):
        return f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE)"
    return f"CAST({v!r} AS DOUBLE)"


def test_sql_float_comparisons_agree_with_duckdb(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    import kudusql

    rng = random.Random(2026)
    rows = [(i, rng.choice(POOL)) for i in range(40)]
    values = ", ".join(f"({k}, {'NULL' if v is None else _literal(v)})" for k, v in rows)
    con = kudusql.connect(str(tmp_path / "db"))
    duck = duckdb.connect()
    try:
        cur = con.cursor()
        cur.execute("CREATE TABLE t (k INT PRIMARY KEY, d DOUBLE) "
                    "PARTITION BY HASH (k) PARTITIONS 2 STORED AS KUDU")
        cur.execute(f"INSERT INTO t VALUES {values}")
        duck.execute("CREATE TABLE t (k INT PRIMARY KEY, d DOUBLE)")
        duck.execute(f"INSERT INTO t VALUES {values}")
        ops = ["=", "<>", "<", "<=", ">", ">="]
        for i in range(150):
            a, b = rng.choice(BOUNDS), rng.choice(BOUNDS)
            form = i % 4
            if form == 0:
                where = f"d {rng.choice(ops)} {_literal(a)}"
            elif form == 1:
                where = f"d BETWEEN {_literal(min(a, b))} AND {_literal(max(a, b))}"
            elif form == 2:
                where = f"d IN ({_literal(a)}, {_literal(b)})"
            else:
                where = f"d {rng.choice(ops)} {_literal(a)} AND d {rng.choice(ops)} {_literal(b)}"
            q = f"SELECT k FROM t WHERE {where} ORDER BY k"
            cur.execute(q)
            got = [r[0] for r in cur.fetchall()]
            want = [r[0] for r in duck.execute(q).fetchall()]
            assert got == want, q
    finally:
        con.close()
        duck.close()
