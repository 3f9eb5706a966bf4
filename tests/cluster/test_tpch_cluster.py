"""TPC-H on a cluster (long: KUDUSQL_LONG=1), through the SQL front end: the eight tables
created with SQL DDL sent to `kudusql serve --masters` (the front end `cluster start`
runs) over the Postgres wire protocol, on a 3-tablet-server cluster (RF 3 by default
there); loaded through the cluster client (the same Table.insert path as embedded, routed
to tablet leaders over DoPut: the bulk path a Spark job or `tpch load` takes); the 22
queries sent over the wire again (asyncpg through `kudusql.connect("postgresql://...")`,
binary results) and checked against DuckDB on the same parquet (tpch/oracle.py's rules)."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest

LONG = os.environ.get("KUDUSQL_LONG") == "1"
SF = float(os.environ.get("KUDUSQL_TPCH_SF", "0.02"))

pytestmark = [pytest.mark.long,
              pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for TPC-H on a cluster")]


@pytest.fixture(scope="module")
def tpch_on_cluster(tmp_path_factory):
    import kudusql
    from kudusql.cluster import remote_catalog_for
    from tests.cluster.conftest import LocalCluster
    from tpch.data import generate, parquet_files
    from tpch.load import insertable
    from tpch.schema import TABLES, create_statement

    pq_dir = str(tmp_path_factory.mktemp("tpch-parquet"))
    generate(SF, pq_dir)
    c = LocalCluster(str(tmp_path_factory.mktemp("tpch-cluster") / "cluster"))
    conn = cat = None
    try:
        c.start()
        conn = kudusql.connect(f"postgresql://kudusql@127.0.0.1:{c.port}/kudusql")
        cat = remote_catalog_for(c.dir)
        files = parquet_files(pq_dir)
        for t in TABLES:
            conn.execute(create_statement(t))              # DDL through the front end
            assert cat.get_table(t).replication_factor == 3
            tbl = cat.table(t)
            for f in files[t]:
                for batch in pq.ParquetFile(f).iter_batches(batch_size=50_000):
                    r = tbl.insert(insertable(batch))
                    assert r.ok and r.num_applied == batch.num_rows
        for t in TABLES:   # the front end sees every loaded row
            n = sum(pq.ParquetFile(f).metadata.num_rows for f in files[t])
            assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == n, t
        yield conn, pq_dir
    finally:
        if conn is not None:
            conn.close()
        if cat is not None:
            cat.close()
        try:
            c.stop()
        finally:
            c.kill_all()


@pytest.mark.parametrize("n", range(1, 23), ids=[f"q{n:02d}" for n in range(1, 23)])
def test_tpch_query_on_cluster(n, tpch_on_cluster):
    from tpch.oracle import compare_query, duckdb_answer
    from tpch.queries import query
    conn, pq_dir = tpch_on_cluster
    ours = conn.execute(query(n)).fetch_arrow_table()
    problems = compare_query(n, ours, duckdb_answer(pq_dir, n))
    assert not problems, f"TPC-H Q{n} through the cluster's SQL front end differs from " \
        "DuckDB:\n" + "\n".join(problems)
