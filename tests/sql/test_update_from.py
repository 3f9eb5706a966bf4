"""UPDATE ... FROM and DELETE ... USING (planner/dml.py `matching_query`, `first_per_key`),
checked against a model.

Random target and source tables (source rows may name the same target row several times)
and random source predicates; the model says which target rows match and, for an UPDATE,
the values each may take: PostgreSQL updates a row that joins several source rows once,
with one of them (which one is unspecified), so the check is that every matched row was
updated exactly once with a value one of its source rows gives, the count is the number of
rows matched, and nothing else changed. A target row joined by several source rows used to
be written once per join row in one batch: its own second write failed the read
precondition (CHANGED) and the statement re-read and re-applied it until 40001, adding to
it each round - the regression test below.
"""

from __future__ import annotations

import random

import pytest

import kudusql

_PREDS = [("s.w > 3", lambda w, tag: w is not None and w > 3),
          ("s.tag = 'a'", lambda w, tag: tag == "a"),
          ("s.w IS NULL OR s.tag <> 'b'", lambda w, tag: w is None or
           (tag is not None and tag != "b")),
          ("true", lambda w, tag: True)]


@pytest.mark.parametrize("seed", range(4))
def test_update_from_and_delete_using_agree_with_a_model(tmp_path, seed):
    rng = random.Random(seed)
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k INT PRIMARY KEY, n INT) PARTITION BY HASH (k) PARTITIONS 2")
    cur.execute("CREATE TABLE s (id INT PRIMARY KEY, tk INT, w INT, tag TEXT)")
    model = {k: rng.randrange(100) for k in range(15)}
    cur.execute("INSERT INTO t VALUES " + ", ".join(f"({k}, {n})" for k, n in model.items()))
    next_id = 0
    try:
        for step in range(25):
            src = []
            cur.execute("DELETE FROM s")
            for _ in range(rng.randrange(0, 12)):
                src.append((next_id, rng.randrange(18), rng.choice([None, 1, 4, 9]),
                            rng.choice([None, "a", "b"])))
                next_id += 1
            if src:
                cur.execute("INSERT INTO s VALUES " + ", ".join(
                    "(" + ", ".join("NULL" if v is None else repr(v) for v in r) + ")"
                    for r in src))
            pred_sql, pred = rng.choice(_PREDS)
            joined: dict[int, list] = {}
            for _, tk, w, tag in src:
                if tk in model and pred(w, tag):
                    joined.setdefault(tk, []).append(w)
            deleting = rng.random() < 0.3
            if deleting:
                cur.execute(f"DELETE FROM t USING s WHERE t.k = s.tk AND ({pred_sql}) "
                            "RETURNING t.k")
                assert sorted(k for (k,) in cur.fetchall()) == sorted(joined), step
                for k in joined:
                    del model[k]
            else:
                cur.execute(f"UPDATE t AS x SET n = x.n + coalesce(s.w, 0) FROM s "
                            f"WHERE x.k = s.tk AND ({pred_sql})")
            assert cur.rowcount == len(joined), step
            cur.execute("SELECT k, n FROM t")
            now = dict(cur.fetchall())
            assert set(now) == set(model), step
            for k, n in now.items():
                if k in joined and not deleting:    # once, with one of its source rows
                    assert n in {model[k] + (w or 0) for w in joined[k]}, (step, k)
                    model[k] = n
                else:
                    assert n == model[k], (step, k)
    finally:
        conn.close()


def test_a_row_joined_twice_is_updated_once(tmp_path):
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k INT PRIMARY KEY, n INT)")
    cur.execute("CREATE TABLE s (id INT PRIMARY KEY, tk INT)")
    cur.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    cur.execute("INSERT INTO s VALUES (10, 1), (11, 1), (12, 1)")
    cur.execute("UPDATE t SET n = t.n + 100 FROM s WHERE t.k = s.tk")
    assert cur.rowcount == 1
    cur.execute("SELECT k, n FROM t ORDER BY k")
    assert cur.fetchall() == [(1, 101), (2, 2)]
    cur.execute("DELETE FROM t USING s WHERE t.k = s.tk RETURNING k")
    assert cur.fetchall() == [(1,)] and cur.rowcount == 1
    conn.close()


def test_explain_analyze_of_update_from_writes_each_row_once(tmp_path):
    """review39: EXPLAIN ANALYZE wrote a row joined by three source rows three times, read
    it again as CHANGED 50 times and failed with 40001 (v = 50)."""
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    cur.execute("CREATE TABLE s (k INT, j INT, PRIMARY KEY (k, j))")
    cur.execute("INSERT INTO t VALUES (1, 0), (2, 0)")
    cur.execute("INSERT INTO s VALUES (1, 1), (1, 2), (1, 3), (2, 1)")
    cur.execute("EXPLAIN ANALYZE UPDATE t SET v = t.v + 1 FROM s WHERE s.k = t.k")
    assert any(r[0].startswith("Rows written: 2") for r in cur.fetchall())
    cur.execute("SELECT k, v FROM t ORDER BY k")
    assert cur.fetchall() == [(1, 1), (2, 1)]
    conn.close()


def test_refusals_before_anything_is_written(tmp_path):
    """`UPDATE t ... FROM t` is 42712 (it updated every row); an aggregate, window or
    set-returning SET value is refused (a set-returning one wrote each row once per value,
    re-read after re-read, until 40001: 5 became 505)."""
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    cur.execute("INSERT INTO t VALUES (1, 5), (2, 5)")
    for sql, state in [("UPDATE t SET v = t.v + 1 FROM t", "42712"),
                       ("UPDATE t SET v = generate_series(10, 11) + t.v", "0A000"),
                       ("UPDATE t SET v = row_number() OVER ()", "42P20"),
                       ("UPDATE t SET v = count(*)", "42803"),
                       ("INSERT INTO t VALUES (1, 0) ON CONFLICT (k) DO UPDATE "
                        "SET v = generate_series(1, 2)", "0A000")]:
        with pytest.raises(kudusql.Error) as ei:
            cur.execute(sql)
        assert ei.value.sqlstate == state, sql
    cur.execute("SELECT k, v FROM t ORDER BY k")
    assert cur.fetchall() == [(1, 5), (2, 5)]
    conn.close()


def test_a_write_naming_one_key_twice_is_refused_not_repeated(tmp_path):
    """The backstop in `write_reread`: rows that name one key twice (what a set-returning
    SET value made) - the second fails its precondition on the first's write (CHANGED);
    re-reading would apply the update again each round. It is 21000 after one write."""
    import pyarrow as pa

    from planner import dml
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    cur.execute("INSERT INTO t VALUES (1, 0)")
    catalog = conn.session.catalog
    table = catalog.table("t")
    twice = pa.table({"k": pa.array([1, 1], pa.int32()), "v": pa.array([1, 2], pa.int32())})
    from sqlglot import exp
    with pytest.raises(Exception) as ei:
        dml.write_reread(catalog, table, exp.to_table("t"), "UPDATE", lambda snap: twice,
                         lambda rows, snap: dml.apply_update(table, exp.to_table("t"), ["v"],
                                                             rows, snap))
    assert getattr(ei.value, "sqlstate", None) == "21000"
    cur.execute("SELECT k, v FROM t")
    assert cur.fetchall() == [(1, 1)]
    conn.close()
