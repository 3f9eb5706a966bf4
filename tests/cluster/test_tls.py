"""A real cluster with TLS on RPC (`kudusql cluster start --rpc-tls`): separate processes
on 127.0.0.1 whose every RPC is TLS, driven through SQL over the Postgres wire; a plaintext
client is refused at once with the TLS error, not retried as if the servers were down."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.cluster.conftest import LocalCluster, _run, kudusql


@pytest.fixture
def tls_cluster(tmp_path):
    yield from _run(LocalCluster(str(tmp_path / "cluster"), 3, ("--rpc-tls",)))


def test_cluster_over_tls(tls_cluster):
    from engine.rpc.rpc import RpcClient, TlsMismatch, read_secret_file
    from kudusql.cluster import rpc_client_for

    c = tls_cluster
    cert, key = os.path.join(c.dir, "rpc-cert.pem"), os.path.join(c.dir, "rpc-key.pem")
    assert os.stat(cert).st_mode & 0o777 == 0o644
    assert os.stat(key).st_mode & 0o777 == 0o600
    with open(os.path.join(c.dir, "cluster.json")) as f:
        assert json.load(f)["tls"] is True
    logs = c.logs()
    assert logs.count("(RPC over TLS)") >= 5, logs  # master, 3 tablet servers, front end

    with c.connect() as conn:
        conn.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT) "
                     "PARTITION BY HASH (k) PARTITIONS 3 WITH (replication_factor = 3)")
        conn.execute("INSERT INTO t SELECT x, 'v' || x FROM generate_series(1, 300) g(x)")
        conn.execute("INSERT INTO t VALUES (1000, 'last')")
        assert conn.execute("SELECT count(*), sum(k) FROM t").fetchone() == \
            (301, 300 * 301 // 2 + 1000)
        assert conn.execute("SELECT v FROM t WHERE k = 1000").fetchone() == ("last",)

    rows = c.status()
    assert all(r["alive"] and not r.get("error") and r["rpc_tls"] for r in rows), rows
    ts = [r for r in rows if r["role"] == "tserver"]
    assert len(ts) == 3 and all(r["uuid"] for r in ts)
    assert sum(r["leads"] + r["follows"] for r in ts) == 9  # 3 tablets x 3 replicas
    r = kudusql("cluster", "status", "--data-dir", c.dir, timeout=60)
    assert r.returncode == 0 and "RPC over TLS" in r.stdout and "error:" not in r.stdout

    master = next(p for p in c.processes() if p["role"] == "master")["addr"]
    rpc = rpc_client_for(c.dir, 5)
    try:
        assert "t" in rpc.call(master, "list_tables")
    finally:
        rpc.close()
    # a client without TLS (but with the secret) is refused at once, in words
    plain = RpcClient(read_secret_file(os.path.join(c.dir, "rpc-secret")), 5)
    t0 = time.monotonic()
    with pytest.raises(TlsMismatch, match="requires TLS on RPC") as ei:
        plain.call(master, "list_tables")
    assert ei.value.sqlstate == "08001" and time.monotonic() - t0 < 3

    # Spark's executor client (no Spark here): scan tokens read over TLS with the CA file;
    # without it the driver's first metadata call fails at once, not after 30 s of retries
    from kudusql.spark.cluster import executor_catalog, scan_tokens
    secret = os.path.join(c.dir, "rpc-secret")
    cat = executor_catalog(master, secret, rpc_ca_file=cert)
    _, tokens = scan_tokens(cat, "t")
    assert len(tokens) == 3
    assert sum(b.num_rows for tok in tokens for b in tok.scan(cat)) == 301
    t0 = time.monotonic()
    with pytest.raises(TlsMismatch):
        executor_catalog(master, secret).get_table("t")
    assert time.monotonic() - t0 < 5

    r = kudusql("cluster", "stop", "--data-dir", c.dir, timeout=60)
    assert r.returncode == 0
    assert not any(_alive(p["pid"]) for p in c.processes())


def _alive(pid) -> bool:
    from kudusql.cluster import _alive as alive
    return alive(pid)
