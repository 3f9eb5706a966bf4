"""TPC-H on kudusql: schema, data generation, loading, the 22 queries and their oracle.

    tpch/schema.py    the eight tables as KuduSQL CREATE TABLE statements (TABLES, load order)
    tpch/data.py      tpchgen-cli -> parquet, cached behind a completion marker
    tpch/load.py      CREATE TABLE + batched inserts into a kudusql connection or a Catalog
    tpch/queries/     q01.sql ... q22.sql (validation parameters); query(n), QUERIES
    tpch/oracle.py    DuckDB's answer on the same parquet; compare() with tolerances

    from tpch.data import generate
    from tpch.load import load
    from tpch.oracle import compare_query, duckdb_answer
    from tpch.queries import QUERIES, query

    files = generate(0.01, "bench-data/tpch-sf0.01")
    conn = kudusql.connect("/tmp/db"); load(conn, "bench-data/tpch-sf0.01")
    for n in QUERIES:
        cur = conn.cursor(); cur.execute(query(n))
        assert not compare_query(n, cur.fetch_arrow_table(),
                                 duckdb_answer("bench-data/tpch-sf0.01", n))

The command is `kudusql tpch` (kudusql/tpch_cli.py), the benchmark bench/tpch_bench.py, the
tests tests/tpch/. DuckDB is an oracle and a
benchmark anchor only, never on kudusql's query path (imported lazily in oracle.py).
"""
