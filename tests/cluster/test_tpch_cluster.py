"""TPC-H on a cluster (long: KUDUSQL_LONG=1): the eight tables created with SQL DDL on a
3-tablet-server cluster (RF 3 by default there), loaded through the cluster client (the
same Table.insert path as embedded, routed to tablet leaders over DoPut), and the 22
queries through a Session over the remote catalog, checked against DuckDB on the same
parquet (tpch/oracle.py's rules)."""

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
    from kudusql.cluster import remote_catalog_for
    from kudusql.session import Database
    from tests.cluster.conftest import LocalCluster
    from tpch.data import generate, parquet_files
    from tpch.load import insertable
    from tpch.schema import TABLES, create_statement

    pq_dir = str(tmp_path_factory.mktemp("tpch-parquet"))
    generate(SF, pq_dir)
    c = LocalCluster(str(tmp_path_factory.mktemp("tpch-cluster") / "cluster"))
    db = None
    try:
        c.start()
        cat = remote_catalog_for(c.dir)
        db = Database(cat, None)
        s = db.session()
        files = parquet_files(pq_dir)
        for t in TABLES:
            s.execute(create_statement(t))
            assert cat.get_table(t).replication_factor == 3
            tbl = cat.table(t)
            for f in files[t]:
                for batch in pq.ParquetFile(f).iter_batches(batch_size=50_000):
                    r = tbl.insert(insertable(batch))
                    assert r.ok and r.num_applied == batch.num_rows
        yield s, pq_dir
    finally:
        if db is not None:
            db.close()
        try:
            c.stop()
        finally:
            c.kill_all()


@pytest.mark.parametrize("n", range(1, 23), ids=[f"q{n:02d}" for n in range(1, 23)])
def test_tpch_query_on_cluster(n, tpch_on_cluster):
    from tpch.oracle import compare_query, duckdb_answer
    from tpch.queries import query
    s, pq_dir = tpch_on_cluster
    ours = s.execute(query(n))[-1].table
    problems = compare_query(n, ours, duckdb_answer(pq_dir, n))
    assert not problems, f"TPC-H Q{n} on the cluster differs from DuckDB:\n" + \
        "\n".join(problems)
