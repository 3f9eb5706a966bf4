"""The TPC-H oracle's comparison rules (tpch/oracle.py), the query files and DuckDB on them.

No SQL layer needed: `compare` is exercised on hand-made tables, and every query runs in
DuckDB on the session's generated data.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
import sqlglot

from tpch.oracle import compare, compare_query, duckdb_answer, duckdb_connect
from tpch.queries import QUERIES, has_limit, order_keys, path, query
from tpch.schema import TABLES, create_statements

D = decimal.Decimal


def t(**cols) -> pa.Table:
    return pa.table(cols)


EXPECTED = t(flag=["A", "N", "R"], qty=[D("1.50"), D("2.00"), D("3.25")],
             day=[dt.date(1995, 1, 1), dt.date(1996, 1, 1), None], n=[1, 2, 3])


# -- compare --------------------------------------------------------------------------------

@pytest.mark.parametrize("ordered", [True, False])
def test_equal_answers(ordered):
    assert compare(EXPECTED, EXPECTED, ordered) == []


def test_columns_by_position_numbers_across_types():
    ours = t(x=["A", "N", "R"], y=[1.5, 2.0, 3.25],
             z=[dt.date(1995, 1, 1), dt.date(1996, 1, 1), None], w=[1.0, 2.0, 3.0])
    assert compare(ours, EXPECTED, True) == []


def test_tolerance():
    big = t(v=[D("505822441.4861")])
    assert compare(t(v=[505822441.4861 * (1 + 5e-7)]), big, True) == []  # relative 1e-6
    assert compare(t(v=[D("0.005")]), t(v=[D("0.0")]), True) == []        # absolute 0.01
    assert compare(t(v=[505822441.4861 * (1 + 1e-5)]), big, True) != []
    assert compare(t(v=[0.02]), t(v=[0.0]), True) != []


def test_detects_a_wrong_value():
    ours = t(flag=["A", "N", "R"], qty=[D("1.50"), D("2.10"), D("3.25")],
             day=[dt.date(1995, 1, 1), dt.date(1996, 1, 1), None], n=[1, 2, 3])
    problems = compare(ours, EXPECTED, ordered_by_query=False)
    assert problems and "qty (col 2): got 2.1, expected 2.0" in problems[0]
    ours = t(flag=["A", "N", "X"], qty=EXPECTED["qty"], day=EXPECTED["day"], n=EXPECTED["n"])
    assert compare(ours, EXPECTED, True) != []


def test_detects_a_missing_and_an_extra_row():
    problems = compare(EXPECTED.slice(0, 2), EXPECTED, ordered_by_query=False)
    assert problems[0] == "row count: got 2, expected 3"
    assert any(p.startswith("missing row: ('R'") for p in problems)
    doubled = pa.concat_tables([EXPECTED, EXPECTED.slice(0, 1)])
    problems = compare(doubled, EXPECTED, ordered_by_query=True)
    assert problems[0] == "row count: got 4, expected 3"
    assert any(p.startswith("unexpected row: ('A'") for p in problems)


def test_multisets_count_duplicates():
    a = t(k=["x", "x", "y"])
    b = t(k=["x", "y", "y"])
    assert compare(a, b, ordered_by_query=False) != []


def test_detects_a_wrong_order_only_where_order_matters():
    shuffled = EXPECTED.take([2, 0, 1])
    problems = compare(shuffled, EXPECTED, ordered_by_query=True)
    assert problems and problems[0] == "same rows, wrong order"
    assert compare(shuffled, EXPECTED, ordered_by_query=False) == []


def test_ties_on_the_order_keys_may_come_in_any_order():
    # ORDER BY revenue DESC: rows 1 and 2 tie on revenue
    expected = t(key=[7, 3, 5, 1], revenue=[D("9.00"), D("5.00"), D("5.00"), D("1.00")])
    ours = expected.take([0, 2, 1, 3])
    assert compare(ours, expected, True, order_keys=[1]) == []
    assert compare(ours, expected, True) != []  # without the keys, positions must match
    wrong = expected.take([1, 0, 2, 3])  # not a tie: 5.00 before 9.00
    assert compare(wrong, expected, True, order_keys=[1]) != []


def test_nulls_dates_and_strings_are_exact():
    assert compare(t(v=[None]), t(v=[None]), True) == []
    assert compare(t(v=[0]), t(v=pa.array([None], pa.int64())), True) != []
    assert compare(t(v=pa.array([None], pa.int64())), t(v=[0]), True) != []
    assert compare(t(v=["1995-01-01"]), t(v=[dt.date(1995, 1, 1)]), True) != []
    assert compare(t(v=[dt.datetime(1995, 1, 1)]), t(v=[dt.date(1995, 1, 1)]), True) != []
    assert compare(t(v=["A "]), t(v=["A"]), True) != []
    assert compare(t(v=["1"]), t(v=[1]), True) != []


def test_detects_a_wrong_column_count():
    problems = compare(EXPECTED.select([0, 1]), EXPECTED, True)
    assert problems and problems[0].startswith("column count: got 2")


def test_reports_are_bounded():
    n = 100
    problems = compare(t(v=list(range(n))), t(v=[x + 1 for x in range(n)]), True)
    assert len(problems) == 21 and problems[-1] == "... 80 more differing rows"


# -- the query files ------------------------------------------------------------------------

def test_query_files():
    assert list(QUERIES) == list(range(1, 23))
    for n in QUERIES:
        sql = query(n)
        assert path(n).name == f"q{n:02d}.sql"
        assert sql.startswith(f"-- TPC-H Q{n}:")
        assert ";" not in sql, n
    assert [n for n in QUERIES if has_limit(n)] == [2, 3, 10, 18, 21]
    # each query with an ORDER BY names result columns only, so ties can be allowed
    assert [n for n in QUERIES if order_keys(n) is None] == [6, 14, 17, 19]  # one row
    assert order_keys(13) == (1, 0) and order_keys(18) == (4, 3)
    with pytest.raises(ValueError):
        query(23)


@pytest.mark.parametrize("n", list(QUERIES), ids=[f"q{n:02d}" for n in QUERIES])
def test_query_parses_in_the_kudusql_dialect(n):
    from planner.dialect import KuduSQL

    (stmt,) = sqlglot.parse(query(n), read=KuduSQL)
    assert isinstance(stmt, sqlglot.exp.Select)


def test_schema_statements():
    from planner.ddl import create_table_spec

    specs = [create_table_spec(s) for s in create_statements()]
    assert [s.name for s in specs] == list(TABLES)
    keys = {s.name: s.schema.key_names for s in specs}
    assert keys["lineitem"] == ["l_orderkey", "l_linenumber"]
    assert keys["partsupp"] == ["ps_partkey", "ps_suppkey"]
    assert all(not c.nullable for s in specs for c in s.schema.columns)
    assert sum(len(s.partition_schema.partitions) for s in specs) == 17


# -- DuckDB on the generated data -----------------------------------------------------------

@pytest.fixture(scope="module")
def duck(tpch_parquet):
    con = duckdb_connect(tpch_parquet, threads=1)
    yield con
    con.close()


@pytest.mark.parametrize("n", list(QUERIES), ids=[f"q{n:02d}" for n in QUERIES])
def test_duckdb_answers_every_query(n, duck, tpch_parquet):
    ans = duckdb_answer(tpch_parquet, n, con=duck)
    assert ans.num_rows > 0
    assert compare_query(n, ans, ans) == []
    if order_keys(n) is not None and ans.num_rows > 1:  # the answer's order is checked
        reversed_ = ans.take(list(range(ans.num_rows - 1, -1, -1)))
        assert compare_query(n, reversed_, ans)[0] == "same rows, wrong order"


def test_duckdb_answer_opens_its_own_connection(tpch_parquet):
    assert duckdb_answer(tpch_parquet, 6).num_rows == 1
