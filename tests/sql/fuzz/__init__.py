"""Differential and metamorphic fuzzers for the SQL layer (docs/sql.md, "The SQL fuzzers").

    gen.py      worlds (random schemas and rows, partly flushed, mutated after a snapshot;
                views over them: gen_views, with interval and timestamptz columns) and
                queries (interval and timestamptz arithmetic, date_trunc, date_bin as
                DuckDB's time_bucket), rendered for kudusql and DuckDB at once
    compare.py  multiset / ordered comparison with numbers normalised across types
    runner.py   World (kudusql + DuckDB on the same rows) and the techniques:
                diff (vs DuckDB), tlp, norec, rules (each optimizer rule off in turn),
                pushdown (engine predicates off)
    wire.py     the same queries through a real `kudusql serve`: psycopg text results vs
                asyncpg binary results vs DuckDB
    __main__.py python -m tests.sql.fuzz [technique ...] [--queries N] [--seed S]
                [--replay SEED] [--interleave] [--progress] [-v]

A seed names a world and a query, so every reported mismatch can be replayed with
`--replay SEED`; each one found so far is a regression test in
tests/sql/test_regressions.py.
"""
