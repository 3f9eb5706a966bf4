"""One comparison of a query's answer from kudusql (a DB-API connection) with DuckDB's,
for the planner's differential tests: rows in any order (sorted by a key where NULL sorts
apart from every value), floats within a relative 1e-12, everything else (decimals,
counts, text) exactly equal."""

from __future__ import annotations

import pytest


def _key(row):
    return tuple((x is None, str(x)) for x in row)


def same_answers(con, duck, sql: str) -> None:
    """Fail with the query and the first differing pair of rows unless `sql` answers the
    same on kudusql's `con` and DuckDB's `duck`."""
    cur = con.cursor()
    cur.execute(sql)
    ours = sorted(cur.fetchall(), key=_key)
    theirs = sorted(duck.execute(sql).fetchall(), key=_key)
    assert len(ours) == len(theirs), sql
    for a, b in zip(ours, theirs):
        for x, y in zip(a, b):
            if isinstance(x, float) or isinstance(y, float):
                assert float(x) == pytest.approx(float(y), rel=1e-12), (sql, a, b)
            else:
                assert x == y, (sql, a, b)       # decimals and counts: exactly
