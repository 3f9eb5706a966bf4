"""The 22 TPC-H queries, one statement per file (`q01.sql` ... `q22.sql`).

Written from the TPC-H specification (v3) with its validation substitution parameters
(§2.4.x.3, e.g. Q1 DELTA = 90, Q2 SIZE = 15 / TYPE = BRASS / REGION = EUROPE), in PostgreSQL
syntax: `date '1998-12-01' - interval '90' day`, `extract(year from d)`,
`substring(s from 1 for 2)`, `limit n` for the spec's row counts. Q15's view `revenue0` is a
common table expression (`with revenue0 as (...)`), the variant the spec permits for
engines without views. Each file starts with a `--` comment naming the query and its
parameters; there is no trailing semicolon.

    from tpch.queries import QUERIES, query
    for n in QUERIES:
        sql = query(n)
    has_limit(n)    # ends in LIMIT: the ORDER BY picks the rows, compare in order
    order_keys(n)   # result column positions of the ORDER BY (ties may come in any order)

What each query asks of a SQL engine (beyond scans, inner joins, GROUP BY and ORDER BY):

    Q1   date - interval, avg, count(*)
    Q2   correlated scalar subquery (min) in WHERE, LIKE suffix, LIMIT
    Q3   date literals, LIMIT
    Q4   EXISTS with a correlated subquery, date + interval month
    Q5   six-way join, date + interval year
    Q6   BETWEEN with constant arithmetic
    Q7   derived table, extract(year), OR of AND-ed join conditions, self-join (n1, n2)
    Q8   derived table, CASE in sum, division of aggregates, extract(year)
    Q9   derived table, LIKE infix, ORDER BY ... DESC
    Q10  date + interval month, LIMIT
    Q11  uncorrelated scalar subquery in HAVING
    Q12  CASE, IN list, column-to-column date comparisons
    Q13  LEFT OUTER JOIN with an extra ON condition, NOT LIKE, derived table with a
         column alias list `as c_orders (c_custkey, c_count)`, count(column)
    Q14  CASE with LIKE prefix, date + interval month
    Q15  CTE referenced twice, uncorrelated scalar subquery (max) over it
    Q16  count(DISTINCT), NOT IN (subquery), NOT LIKE, IN list
    Q17  correlated scalar subquery (avg) in WHERE
    Q18  IN (subquery with GROUP BY / HAVING), LIMIT
    Q19  OR of three AND-groups sharing the join predicate, IN lists, BETWEEN
    Q20  nested IN subqueries, correlated scalar subquery (sum) on two columns
    Q21  EXISTS and NOT EXISTS with correlation and <> , LIMIT
    Q22  substring(... from ... for ...), IN list, uncorrelated scalar subquery,
         NOT EXISTS (correlated)
"""

from __future__ import annotations

import functools
import pathlib
import re

QUERIES = range(1, 23)
_DIR = pathlib.Path(__file__).resolve().parent


def path(n: int) -> pathlib.Path:
    """The file of query `n` (1..22)."""
    if n not in QUERIES:
        raise ValueError(f"TPC-H has queries 1..22, not {n!r}")
    return _DIR / f"q{n:02d}.sql"


@functools.cache
def query(n: int) -> str:
    """The SQL text of TPC-H query `n` (1..22): one statement, no trailing semicolon."""
    return path(n).read_text().strip()


def has_limit(n: int) -> bool:
    """Whether query `n` ends in LIMIT n (Q2, Q3, Q10, Q18, Q21): its ORDER BY then decides
    which rows are returned, so answers must be compared in order."""
    return re.search(r"\blimit\s+\d+\s*$", query(n), re.IGNORECASE) is not None


@functools.cache
def order_keys(n: int) -> tuple[int, ...] | None:
    """The result column positions (0-based) of query `n`'s outer ORDER BY, or None when
    it has none or an item is not a column of its select list (sqlglot reads the text)."""
    import sqlglot  # the planner's parser; imported here so listing queries stays cheap
    from sqlglot import exp

    tree = sqlglot.parse_one(query(n), read="postgres")
    order = tree.args.get("order")
    if not isinstance(tree, exp.Select) or order is None:
        return None
    outputs = [e.alias_or_name.lower() for e in tree.expressions]
    keys = []
    for item in order.expressions:
        e = item.this
        name = e.name.lower() if isinstance(e, exp.Column) else None
        if name is None or outputs.count(name) != 1:
            return None
        keys.append(outputs.index(name))
    return tuple(keys)


def parse_selection(text: str | None) -> list[int]:
    """"1,3,5-7" (or "q1,q3") -> [1, 3, 5, 6, 7]; empty or None -> all 22. ValueError
    names numbers that are not TPC-H queries."""
    if not text:
        return list(QUERIES)
    out: list[int] = []
    for part in text.split(","):
        part = part.strip().lower().lstrip("q")
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-"))
            out.extend(range(lo, hi + 1))
        elif part:
            out.append(int(part))
    bad = [n for n in out if n not in QUERIES]
    if bad:
        raise ValueError(f"no TPC-H queries {bad} (1..22)")
    return out
