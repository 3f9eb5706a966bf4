"""ALTER TABLE on a real cluster (master, 3 tablet servers, SQL front end as processes):
properties and comments, range partitions, columns. Every wait is bounded; the cluster is
stopped (and every process killed) whatever happens."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.cluster.conftest import LocalCluster, _run


@pytest.fixture(scope="module")
def mcluster(tmp_path_factory):
    """One cluster for the module (starting one costs seconds on a loaded machine)."""
    yield from _run(LocalCluster(str(tmp_path_factory.mktemp("alter") / "cluster")))


def _show_create(conn, table: str) -> str:
    return conn.execute(f"SHOW CREATE TABLE {table}").fetchone()[0]


def _error(conn, sql: str) -> psycopg.Error:
    try:
        conn.execute(sql)
    except psycopg.Error as e:
        return e
    raise AssertionError(f"accepted: {sql}")


def test_properties_and_comment(mcluster):
    from kudusql.cluster import remote_catalog_for
    with mcluster.connect() as conn:
        conn.execute("CREATE TABLE p (k BIGINT PRIMARY KEY, v TEXT) "
                     "PARTITION BY HASH (k) PARTITIONS 2 WITH (replication_factor = 3)")
        conn.execute("INSERT INTO p VALUES (1, 'a')")
        conn.execute("ALTER TABLE p SET TBLPROPERTIES ('a' = '1', 'b' = '2')")
        conn.execute("COMMENT ON TABLE p IS 'hello'")
        conn.execute("ALTER TABLE p UNSET TBLPROPERTIES ('a')")
        text = _show_create(conn, "p")
        assert "COMMENT 'hello'" in text and "'b'='2'" in text and "'a'=" not in text
        e = _error(conn, "ALTER TABLE p UNSET TBLPROPERTIES ('nope')")
        assert e.sqlstate == "42704"
        e = _error(conn, "ALTER TABLE nope SET TBLPROPERTIES ('a' = '1')")
        assert e.sqlstate == "42P01"
        e = _error(conn, "ALTER TABLE p SET TBLPROPERTIES ('kudu.num_tablet_replicas' = '1')")
        assert e.sqlstate == "0A000"
        assert conn.execute("SELECT v FROM p").fetchall() == [("a",)]
    # another client (as another front end would) reads the master's entry
    cat = remote_catalog_for(mcluster.dir, timeout_s=10)
    try:
        meta = cat.get_table("p")
        assert meta.comment == "hello"
        assert meta.properties.get("b") == "2" and "a" not in meta.properties
    finally:
        cat.close()
    with mcluster.connect() as conn:
        conn.execute("ALTER TABLE p UNSET TBLPROPERTIES ('comment')")
        assert "COMMENT" not in _show_create(conn, "p")


def _tserver_tablets(c: LocalCluster) -> dict[str, set[str]]:
    """tablet id -> uuids of the tablet servers holding a replica (their own status)."""
    from kudusql.cluster import rpc_client_for
    rpc = rpc_client_for(c.dir, 5)
    out: dict[str, set[str]] = {}
    try:
        for p in c.processes():
            if p["role"] == "tserver":
                st = rpc.call(p["addr"], "status", timeout_s=5)
                for tid in st["tablets"]:
                    out.setdefault(tid, set()).add(st["uuid"])
    finally:
        rpc.close()
    return out


def _embedded_error(tmp_path, statements: list[str], failing: str) -> tuple[str, str]:
    """(sqlstate, message) of `failing` run embedded after `statements`."""
    import tempfile
    import kudusql
    conn = kudusql.connect(tempfile.mkdtemp(dir=tmp_path))
    try:
        cur = conn.cursor()
        for s in statements:
            cur.execute(s)
        try:
            cur.execute(failing)
        except kudusql.dbapi.Error as e:
            return e.sqlstate, str(e)
        raise AssertionError(f"embedded accepted {failing}")
    finally:
        conn.close()


RANGED = ("CREATE TABLE r (k BIGINT PRIMARY KEY, v TEXT) PARTITION BY HASH (k) PARTITIONS 2, "
          "RANGE (k) (PARTITION 0 <= VALUES < 100)")


def test_add_and_drop_range_partition(mcluster, tmp_path):
    from kudusql.cluster import remote_catalog_for
    c = mcluster
    with c.connect() as conn:
        conn.execute(RANGED + " WITH (replication_factor = 3)")
        conn.execute("INSERT INTO r SELECT x, 'a' FROM generate_series(0, 99) g(x)")
        # a key no range covers: the same per-row error as embedded
        want = _embedded_error(tmp_path, [RANGED], "INSERT INTO r VALUES (150, 'x')")
        e = _error(conn, "INSERT INTO r VALUES (150, 'x')")
        assert (e.sqlstate, want[0]) == (want[0], e.sqlstate)
        assert "no range partition" in str(e) and "no range partition" in want[1]
        old_tablets = {row[0] for row in conn.execute("SHOW TABLETS r").fetchall()}
        assert len(old_tablets) == 2
        conn.execute("ALTER TABLE r ADD RANGE PARTITION 100 <= VALUES < 200")
        conn.execute("INSERT INTO r SELECT x, 'b' FROM generate_series(100, 199) g(x)")
        assert conn.execute("SELECT count(*), min(k), max(k) FROM r").fetchone() == (200, 0, 199)
        rows = conn.execute("SHOW TABLETS r").fetchall()
        assert len({row[0] for row in rows}) == 4 and len(rows) == 12  # 4 tablets x RF 3
        assert sum(1 for row in rows if row[5] == "LEADER") == 4
        assert _error(conn, "ALTER TABLE r ADD RANGE PARTITION 100 <= VALUES < 200"
                      ).sqlstate == "42710"
        conn.execute("ALTER TABLE r ADD IF NOT EXISTS RANGE PARTITION 100 <= VALUES < 200")
        e = _error(conn, "ALTER TABLE r ADD RANGE PARTITION 150 <= VALUES < 250")
        assert "conflicts" in str(e)
        # a front end holding the table from before the DROP (another process would)
        other = remote_catalog_for(c.dir, timeout_s=15)
        try:
            stale = other.table("r")
            assert stale.count_rows() == 200
            conn.execute("ALTER TABLE r DROP RANGE PARTITION 0 <= VALUES < 100")
            assert conn.execute("SELECT count(*), min(k) FROM r").fetchone() == (100, 100)
            want = _embedded_error(tmp_path, [RANGED, "ALTER TABLE r DROP RANGE PARTITION "
                                                      "0 <= VALUES < 100"],
                                   "INSERT INTO r VALUES (5, 'x')")
            e = _error(conn, "INSERT INTO r VALUES (5, 'x')")
            assert e.sqlstate == want[0] and "no range partition" in str(e)
            # the stale Table routes a row to a dropped tablet: a clear error, nothing
            # written; the statement run again (metadata refreshed) gets the per-row error
            t0 = time.monotonic()
            with pytest.raises(Exception) as ei:
                stale.insert({"k": [7], "v": ["stale"]})
            assert getattr(ei.value, "sqlstate", None) == "40001", ei.value
            assert "dropped" in str(ei.value) and time.monotonic() - t0 < 10
            r = other.table("r").insert({"k": [7], "v": ["fresh"]})
            assert not r.ok and "no range partition" in r.row_errors[0].message
        finally:
            other.close()
        assert _error(conn, "ALTER TABLE r DROP RANGE PARTITION 0 <= VALUES < 100"
                      ).sqlstate == "42704"
        conn.execute("ALTER TABLE r DROP IF EXISTS RANGE PARTITION 0 <= VALUES < 100")
        assert conn.execute("SELECT count(*) FROM r").fetchone() == (100,)
    # the dropped range's replicas leave the tablet servers
    deadline = time.monotonic() + 20
    while True:
        held = _tserver_tablets(c)
        if not any(t in held for t in old_tablets):
            break
        assert time.monotonic() < deadline, f"replicas of dropped tablets remain: {held}"
        time.sleep(0.3)
    with c.connect() as conn:  # a range added again is empty
        conn.execute("ALTER TABLE r ADD RANGE PARTITION 0 <= VALUES < 100")
        conn.execute("INSERT INTO r VALUES (5, 'again')")
        assert conn.execute("SELECT k, v FROM r WHERE k < 100").fetchall() == [(5, "again")]


def _replica_versions(c: LocalCluster, table_tablets: set[str]) -> dict[tuple[str, str], int]:
    """(tablet id, server uuid) -> the schema version that replica applied."""
    from kudusql.cluster import rpc_client_for
    rpc = rpc_client_for(c.dir, 5)
    out = {}
    try:
        for p in c.processes():
            if p["role"] != "tserver":
                continue
            try:
                st = rpc.call(p["addr"], "status", timeout_s=5)
            except Exception:  # noqa: BLE001 - a server that is down reports nothing
                continue
            for tid, rep in st["tablets"].items():
                if tid in table_tablets:
                    out[(tid, st["uuid"])] = rep["schema_version"]
    finally:
        rpc.close()
    return out


def _wait_versions(c: LocalCluster, tablets: set[str], version: int, n: int,
                   timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        got = _replica_versions(c, tablets)
        if len(got) == n and all(v == version for v in got.values()):
            return
        assert time.monotonic() < deadline, f"replicas not at version {version}: {got}"
        time.sleep(0.3)


def _wait_dead(pid: int, timeout_s: float = 10) -> None:
    import os
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return  # a zombie: dead, not yet reaped
        except (ProcessLookupError, FileNotFoundError):
            return
        assert time.monotonic() < deadline, f"process {pid} still alive"
        time.sleep(0.05)


def test_add_drop_rename_column(mcluster):
    import os
    import signal
    from kudusql.cluster import remote_catalog_for, restart_process
    c = mcluster
    with c.connect() as conn:
        conn.execute("CREATE TABLE cc (k BIGINT PRIMARY KEY, v TEXT) PARTITION BY HASH (k) "
                     "PARTITIONS 3 WITH (replication_factor = 3)")
        conn.execute("INSERT INTO cc SELECT x, 'v' || x FROM generate_series(0, 299) g(x)")
        tablets = {row[0] for row in conn.execute("SHOW TABLETS cc").fetchall()}
        conn.execute("ALTER TABLE cc ADD COLUMN x BIGINT DEFAULT 7")
        assert conn.execute("SELECT count(*), min(x), max(x) FROM cc").fetchone() == (300, 7, 7)
        conn.execute("INSERT INTO cc VALUES (300, 'v300', 70)")
        assert conn.execute("SELECT x FROM cc WHERE k = 300").fetchone() == (70,)
        assert _error(conn, "ALTER TABLE cc ADD COLUMN x INT").sqlstate == "42701"
        conn.execute("ALTER TABLE cc RENAME COLUMN v TO w")
        assert conn.execute("SELECT w FROM cc WHERE k = 5").fetchone() == ("v5",)
        assert _error(conn, "SELECT v FROM cc").sqlstate == "42703"
        conn.execute("ALTER TABLE cc DROP COLUMN x")
        assert [d.name for d in conn.execute("SELECT * FROM cc LIMIT 1").description] == \
            ["k", "w"]
        assert _error(conn, "ALTER TABLE cc DROP COLUMN x").sqlstate == "42703"
        conn.execute("ALTER TABLE cc ADD COLUMN x INT")  # a new column: the old x's data
        assert conn.execute("SELECT count(*) FROM cc WHERE x IS NULL").fetchone() == (301,)
    # every replica (not just the leaders) applied the three alters, in log order
    _wait_versions(c, tablets, 4, 9)

    # A front end that read the table before an ALTER (another process would, for up to
    # its metadata TTL): its writes are converted by column id, a dropped column fails,
    # its reads get 40001 and the statement run again works; nothing is lost or misfiled.
    other = remote_catalog_for(c.dir, timeout_s=20)
    try:
        stale = other.table("cc")  # k, w, x at version 4
        with c.connect() as conn:
            conn.execute("ALTER TABLE cc RENAME COLUMN w TO w2")
            conn.execute("ALTER TABLE cc ADD COLUMN w TEXT")  # the old name, a new column
        with pytest.raises(Exception) as ei:
            list(stale.scan(["k", "w"]))
        assert getattr(ei.value, "sqlstate", None) == "40001", ei.value
        assert stale.metadata.schema_version == 4  # still the old metadata
        r = stale.insert({"k": [1000, 1001], "w": ["s0", "s1"], "x": [1, 2]})
        assert r.ok, r.row_errors
        with c.connect() as conn:
            assert conn.execute("SELECT w2, w, x FROM cc WHERE k >= 1000 ORDER BY k"
                                ).fetchall() == [("s0", None, 1), ("s1", None, 2)]
        stale = other.table("cc")  # fresh metadata: reads work again
        assert stale.count_rows() == 303
        with c.connect() as conn:
            conn.execute("ALTER TABLE cc DROP COLUMN x")
        with pytest.raises(Exception) as ei:
            stale.insert({"k": [1002], "w2": ["s2"], "x": [3]})
        assert getattr(ei.value, "sqlstate", None) == "42703", ei.value
        assert "dropped" in str(ei.value)
    finally:
        other.close()
    with c.connect() as conn:
        assert conn.execute("SELECT count(*) FROM cc WHERE k >= 1000").fetchone() == (2,)
    _wait_versions(c, tablets, 7, 9)

    # a tablet server down during an ALTER catches up from its log when it comes back;
    # a restart replays the ALTER_SCHEMA entries harmlessly (idempotent by version)
    ts = [p for p in c.processes() if p["role"] == "tserver"]
    victim = ts[0]
    os.kill(victim["pid"], signal.SIGKILL)
    with c.connect() as conn:
        conn.execute("ALTER TABLE cc ADD COLUMN y BIGINT DEFAULT 5")
        conn.execute("INSERT INTO cc VALUES (2000, 'a', 'b', 9)")
        assert conn.execute("SELECT count(*), sum(y) FROM cc").fetchone() == (304, 303 * 5 + 9)
    _wait_dead(victim["pid"])
    restart_process(c.dir, victim["name"])
    _wait_versions(c, tablets, 8, 9, timeout_s=60)
    second = ts[1]
    os.kill(second["pid"], signal.SIGKILL)  # its replicas restart from their logs
    _wait_dead(second["pid"])
    restart_process(c.dir, second["name"])
    _wait_versions(c, tablets, 8, 9, timeout_s=60)
    # the replicas that were down during the ALTER serve the data as leaders
    target = next(p["uuid"] for p in c.status() if p["name"] == victim["name"])
    for tid in sorted(tablets):
        c.make_leader(tid, target)
    with c.connect() as conn:
        assert conn.execute("SELECT count(*), sum(y), count(w2) FROM cc").fetchone() == \
            (304, 303 * 5 + 9, 304)


def test_writes_racing_with_alters_are_neither_lost_nor_misfiled(mcluster):
    """Writers insert without pause while the table gains a column, renames one and adds
    a new column under the old name: every acknowledged row is there, its value in the
    column it was written to (by position, as the statements were planned); a refused
    one is absent."""
    import threading
    c = mcluster
    with c.connect() as conn:
        conn.execute("CREATE TABLE wr (k BIGINT PRIMARY KEY, v TEXT) PARTITION BY HASH (k) "
                     "PARTITIONS 3 WITH (replication_factor = 3)")
    stop = threading.Event()
    acked: list[int] = []
    failures: list[str] = []

    def writer(i: int) -> None:
        k = i * 1_000_000
        with c.connect() as conn:
            while not stop.is_set():
                try:
                    conn.execute("INSERT INTO wr VALUES (%s, %s)", (k, f"w{k}"))
                    acked.append(k)
                except psycopg.Error as e:
                    failures.append((k, e.sqlstate, str(e)))
                k += 1
    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        with c.connect() as conn:
            conn.execute("ALTER TABLE wr ADD COLUMN z BIGINT DEFAULT 1")
            time.sleep(0.5)
            conn.execute("ALTER TABLE wr RENAME COLUMN v TO v2")
            time.sleep(0.5)
            conn.execute("ALTER TABLE wr ADD COLUMN v TEXT")
            time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    # A statement planned just before the RENAME and run after it names a column the
    # table no longer has: refused whole with 42703 (as embedded), nothing applied.
    assert all(f[1] == "42703" and '"v"' in f[2] for f in failures), failures[:5]
    with c.connect() as conn:
        rows = dict(conn.execute("SELECT k, v2 FROM wr").fetchall())
        assert conn.execute("SELECT count(*) FROM wr WHERE v IS NOT NULL").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM wr WHERE z <> 1").fetchone() == (0,)
    assert len(acked) > 20
    assert set(acked) <= set(rows), f"lost {len(set(acked) - set(rows))} acked rows"
    assert all(rows[k] == f"w{k}" for k in acked)
    assert not {f[0] for f in failures} & set(rows), "a refused insert was applied"
    print(f"\n{len(acked)} racing inserts acknowledged, all present; "
          f"{len(failures)} refused with 42703")


def test_alter_left_pending_is_finished_when_the_tablets_come_back(mcluster):
    """Two of three tablet servers down: the ALTER cannot reach a majority of any tablet,
    fails in its (shortened) time with 57P03 and stays pending in the catalog; once the
    servers are back the master finishes it by itself. The same ALTER sent again while it
    is pending finishes the pending one (not "already exists": a client's retry after a
    master failover)."""
    import os
    import signal
    from engine import errors
    from engine.schema import ColumnSchema, DataType
    from kudusql.cluster import restart_process, rpc_client_for
    c = mcluster
    with c.connect() as conn:
        conn.execute("CREATE TABLE pd (k BIGINT PRIMARY KEY, v TEXT) PARTITION BY HASH (k) "
                     "PARTITIONS 2 WITH (replication_factor = 3)")
        conn.execute("INSERT INTO pd SELECT x, 'a' FROM generate_series(1, 50) g(x)")
        tablets = {row[0] for row in conn.execute("SHOW TABLETS pd").fetchall()}
    master = next(p for p in c.processes() if p["role"] == "master")["addr"]
    down = [p for p in c.processes() if p["role"] == "tserver"][1:]
    for p in down:
        os.kill(p["pid"], signal.SIGKILL)
    for p in down:
        _wait_dead(p["pid"])
    rpc = rpc_client_for(c.dir, 30)
    req = {"name": "pd", "kind": "add_column", "timeout_s": 3,
           "column": ColumnSchema("z", DataType.INT64, default=3).to_dict()}
    try:
        t0 = time.monotonic()
        with pytest.raises(errors.EngineError) as ei:
            rpc.call(master, "alter_table", req, timeout_s=30)
        assert ei.value.sqlstate == "57P03" and "pending" in str(ei.value)
        assert time.monotonic() - t0 < 20
        t = rpc.call(master, "get_table", {"name": "pd"})["table"]
        assert t["pending_schema"] is not None and t["schema_version"] == 0
        # the same ALTER again (a client retrying, e.g. after a master failover) finishes
        # the pending one rather than answering "already exists"; here: still pending
        with pytest.raises(errors.EngineError) as ei:
            rpc.call(master, "alter_table", req, timeout_s=30)
        assert ei.value.sqlstate == "57P03", ei.value
        for p in down:
            restart_process(c.dir, p["name"])
        deadline = time.monotonic() + 60
        while True:
            t = rpc.call(master, "get_table", {"name": "pd"})["table"]
            if t["pending_schema"] is None:
                break
            assert time.monotonic() < deadline, "the pending ALTER was not finished"
            time.sleep(0.5)
        assert t["schema_version"] == 1
        with pytest.raises(errors.EngineError) as ei:  # done now: a new ALTER
            rpc.call(master, "alter_table", req, timeout_s=30)
        assert ei.value.sqlstate == "42701"
    finally:
        rpc.close()
    _wait_versions(c, tablets, 1, 6, timeout_s=60)
    with c.connect() as conn:
        assert conn.execute("SELECT count(*), sum(z) FROM pd").fetchone() == (50, 150)


def test_replica_added_after_alters_replays_them(cluster4):
    """A replica re-replicated after ALTERs starts from the schema its tablet was created
    with and replays the log (old writes under the old schema, then the ALTER_SCHEMA
    entries): as leader it serves every row with the current columns."""
    import os
    import signal
    from kudusql.cluster import rpc_client_for
    c = cluster4
    with c.connect() as conn:
        conn.execute("CREATE TABLE rr (k BIGINT PRIMARY KEY, v TEXT) PARTITION BY HASH (k) "
                     "PARTITIONS 2 WITH (replication_factor = 3)")
        conn.execute("INSERT INTO rr SELECT x, 'a' || x FROM generate_series(1, 100) g(x)")
        conn.execute("ALTER TABLE rr ADD COLUMN x BIGINT DEFAULT 4")
        conn.execute("INSERT INTO rr SELECT x, 'b' || x, 5 FROM generate_series(101, 150) g(x)")
        conn.execute("ALTER TABLE rr RENAME COLUMN v TO w")
        conn.execute("ALTER TABLE rr DROP COLUMN x")
        conn.execute("ALTER TABLE rr ADD COLUMN x TEXT")  # the name again, a new column
        conn.execute("INSERT INTO rr VALUES (151, 'c', 'new')")
    rpc = rpc_client_for(c.dir, 5)
    master = next(p for p in c.processes() if p["role"] == "master")["addr"]
    try:
        table_id = rpc.call(master, "get_table", {"name": "rr"})["table"]["id"]

        def locs():
            return rpc.call(master, "locations", {"table_id": table_id})["locations"]
        before = {tid: {r["uuid"] for r in loc["replicas"]} for tid, loc in locs().items()}
        servers = {p["uuid"]: p for p in c.status() if p["role"] == "tserver"}
        victim = max(servers, key=lambda u: sum(u in us for us in before.values()))
        os.kill(servers[victim]["pid"], signal.SIGKILL)
        c.wait_rereplicated(locs, victim, timeout_s=90)
        now = locs()
    finally:
        rpc.close()
    moved = 0
    for tid, loc in now.items():
        new = {r["uuid"] for r in loc["replicas"]} - before[tid]
        if not new:
            continue
        _wait_versions(c, {tid}, 4, 3, timeout_s=60)
        c.make_leader(tid, new.pop())
        moved += 1
    assert moved >= 1
    with c.connect() as conn:
        assert [d.name for d in conn.execute("SELECT * FROM rr LIMIT 1").description] == \
            ["k", "w", "x"]
        assert conn.execute("SELECT count(*), count(x), min(w), max(w) FROM rr").fetchone() \
            == (151, 1, "a1", "c")
        assert conn.execute("SELECT w, x FROM rr WHERE k IN (100, 101, 151) ORDER BY k"
                            ).fetchall() == [("a100", None), ("b101", None), ("c", "new")]
