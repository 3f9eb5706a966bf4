"""A real cluster (1 master, 3 tablet servers, 1 SQL front end: separate processes on
127.0.0.1) under kill -9 and full restarts, driven through SQL over the Postgres wire."""

from __future__ import annotations

import os
import signal
import threading
import time

import psycopg

from tests.cluster.conftest import kudusql

WRITERS = 4


def _create(conn) -> None:
    conn.execute("CREATE TABLE s (k BIGINT PRIMARY KEY, w INT, v TEXT) "
                 "PARTITION BY HASH (k) PARTITIONS 3 WITH (replication_factor = 3)")


class Writers:
    """Several connections inserting unique keys, one row per statement; records what was
    acknowledged, what failed (outcome unknown) and when each ack came."""

    def __init__(self, cluster, n=WRITERS):
        self.cluster = cluster
        self.stop = threading.Event()
        self.acked: list[set[int]] = [set() for _ in range(n)]
        self.unknown: list[set[int]] = [set() for _ in range(n)]
        self.ack_times: list[list[float]] = [[] for _ in range(n)]
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._run, args=(w,), daemon=True)
                        for w in range(n)]

    def _run(self, w: int) -> None:
        conn = self.cluster.connect()
        i = 0
        try:
            while not self.stop.is_set():
                k = w * 1_000_000 + i
                i += 1
                try:
                    conn.execute("INSERT INTO s VALUES (%s, %s, %s)", (k, w, f"row {k}"))
                    self.acked[w].add(k)
                    self.ack_times[w].append(time.monotonic())
                except psycopg.Error as e:
                    self.unknown[w].add(k)
                    self.errors.append(f"{e.sqlstate}: {e}")
                    if conn.closed:
                        conn = self.cluster.connect()
        finally:
            conn.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in self.threads), "a writer hung"

    def all_acked(self) -> set[int]:
        return set().union(*self.acked)

    def all_attempted(self) -> set[int]:
        return self.all_acked() | set().union(*self.unknown)

    def gap_after(self, t_kill: float) -> float:
        """The longest time any writer went without an ack across the kill."""
        worst = 0.0
        for times in self.ack_times:
            before = [t for t in times if t <= t_kill]
            after = [t for t in times if t > t_kill]
            assert after, "a writer never got an ack after the kill"
            start = before[-1] if before else t_kill
            gaps = [b - a for a, b in zip([start] + after, after)]
            worst = max(worst, max(gaps))
        return worst


def _wait_acks(writers: Writers, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while sum(len(a) for a in writers.acked) < n:
        assert time.monotonic() < deadline, f"fewer than {n} acks in {timeout} s: " \
                                            f"{writers.errors[-3:]}"
        time.sleep(0.05)


def _keys(conn) -> list[int]:
    return [r[0] for r in conn.execute("SELECT k FROM s").fetchall()]


def test_kill9_leader_during_writes_then_full_restart(cluster):
    with cluster.connect() as conn:
        _create(conn)
        conn.execute("INSERT INTO s VALUES (-1, -1, 'first')")
    status = cluster.status()
    victim = max((p for p in status if p["role"] == "tserver"), key=lambda p: p["leads"])
    assert victim["leads"] >= 1, status
    with Writers(cluster) as w:
        _wait_acks(w, 100)
        t_kill = time.monotonic()
        os.kill(victim["pid"], signal.SIGKILL)
        _wait_acks(w, sum(len(a) for a in w.acked) + 200, timeout=60)
        time.sleep(0.5)
    gap = w.gap_after(t_kill)
    print(f"\nwrite gap after kill -9 of the leader of {victim['leads']} tablets: {gap:.2f} s; "
          f"{len(w.all_acked())} acked, {len(w.all_attempted()) - len(w.all_acked())} unknown")
    assert gap < 3.0, f"writes resumed only after {gap:.2f} s"
    # an INSERT of a fresh key can only fail as a duplicate if a retry applied it twice
    assert not [e for e in w.errors if e.startswith("23505")], w.errors[:5]
    with cluster.connect() as conn:
        keys = _keys(conn)
    assert len(keys) == len(set(keys))
    present = set(keys) - {-1}
    assert w.all_acked() <= present, f"lost {len(w.all_acked() - present)} acked rows"
    assert present <= w.all_attempted(), "rows that were never attempted appeared"
    # the whole cluster stops and starts again (the killed server restarts from its WAL)
    cluster.stop()
    cluster.start(first=False)
    with cluster.connect() as conn:
        after = set(_keys(conn)) - {-1}
        assert after == present
        n = conn.execute("SELECT count(*) FROM s").fetchone()[0]
        assert n == len(present) + 1
    st = cluster.status()
    assert all(p["alive"] for p in st)
    assert sum(p["leads"] for p in st if p["role"] == "tserver") == 3


def test_cluster_sql_errors_and_refusals(cluster):
    with cluster.connect() as conn:
        try:
            conn.execute("CREATE TABLE r5 (k INT PRIMARY KEY) WITH (replication_factor = 5)")
            raise AssertionError("RF 5 on 3 servers was accepted")
        except psycopg.Error as e:
            assert "not enough live tablet servers" in str(e)
        _create(conn)
        conn.execute("INSERT INTO s VALUES (1, 1, 'a'), (2, 1, 'b')")
        try:
            conn.execute("INSERT INTO s VALUES (1, 2, 'dup')")
            raise AssertionError("a duplicate key was accepted")
        except psycopg.Error as e:
            assert e.sqlstate == "23505"
        try:  # a diff scan from before the ancient history mark: refused, not partial
            conn.execute("SELECT * FROM table_changes('s', 1, 2)")
            raise AssertionError("a diff scan below the ancient history mark was accepted")
        except psycopg.Error as e:
            assert e.sqlstate == "22023", e
        # diff scans run on the tablet leaders (the "changes" RPC)
        got = conn.execute("SELECT k, v, is_deleted FROM table_changes('s', "
                           "now() - interval '5 minutes', now()) ORDER BY k").fetchall()
        assert got == [(1, "a", False), (2, "b", False)]
        rows = conn.execute("SELECT w, count(*) FROM s GROUP BY w").fetchall()
        assert rows == [(1, 2)]
        # a driver's pipelined batch (psycopg executemany) on a cluster: the rows before
        # the duplicate are applied, the duplicate is 23505, nothing after it (remote
        # tablets cannot write in order, so the wire runs the batch row by row)
        try:
            conn.cursor().executemany("INSERT INTO s VALUES (%s, %s, %s)",
                                      [(10, 2, "x"), (11, 2, "y"), (1, 2, "dup"), (12, 2, "z")])
            raise AssertionError("a duplicate key in a batch was accepted")
        except psycopg.Error as e:
            assert e.sqlstate == "23505"
        assert conn.execute("SELECT k FROM s WHERE w = 2 ORDER BY k").fetchall() == \
            [(10,), (11,)]
        conn.execute("DELETE FROM s WHERE w = 2")
        # a join whose selective side filters the other's scan at run time: on a cluster
        # the filter applies to the batches that arrive (it cannot cross the RPC)
        conn.execute("INSERT INTO s SELECT i, 3, 'f' FROM generate_series(100, 400) AS g(i)")
        got = conn.execute("SELECT count(*), sum(a.k) FROM s a JOIN s b ON a.k = b.k "
                           "WHERE b.v = 'b'").fetchall()
        assert got == [(1, 2)]
        conn.execute("DELETE FROM s WHERE w = 3")
    # RPC calls without the cluster secret are refused; the secret file is 0600
    from engine import errors
    from engine.rpc.rpc import RpcClient
    master = next(p for p in cluster.processes() if p["role"] == "master")
    try:
        RpcClient("wrong").call(master["addr"], "list_tables", timeout_s=5)
        raise AssertionError("a call with the wrong secret was answered")
    except errors.InvalidArgument as e:
        assert "secret" in str(e)
    assert os.stat(os.path.join(cluster.dir, "rpc-secret")).st_mode & 0o777 == 0o600
    r = kudusql("cluster", "status", "--data-dir", cluster.dir)
    assert r.returncode == 0 and "tserver-2" in r.stdout
    # without any master, reads and writes of known tables go on (cached metadata)
    os.kill(master["pid"], signal.SIGKILL)
    with cluster.connect() as conn:
        conn.execute("INSERT INTO s VALUES (3, 1, 'c')")
        assert conn.execute("SELECT count(*) FROM s").fetchone()[0] == 3




def test_dead_server_is_replaced_and_the_new_replica_has_the_data(cluster4):
    from kudusql.cluster import rpc_client_for
    c = cluster4
    rpc = rpc_client_for(c.dir, 5)
    master = next(p for p in c.processes() if p["role"] == "master")["addr"]
    with c.connect() as conn:
        _create(conn)
        for i in range(0, 300, 100):
            conn.execute("INSERT INTO s SELECT x, 0, 'v' FROM generate_series(%s, %s) g(x)",
                         (i, i + 99))
    tservers = {p["uuid"]: p for p in c.status() if p["role"] == "tserver"}
    table_id = rpc.call(master, "get_table", {"name": "s"})["table"]["id"]

    def replicas():
        return rpc.call(master, "locations", {"table_id": table_id})["locations"]
    victim = next(u for u, p in tservers.items() if p["leads"] + p["follows"] > 0)
    affected = [tid for tid, loc in replicas().items()
                if victim in [r["uuid"] for r in loc["replicas"]]]
    os.kill(tservers[victim]["pid"], signal.SIGKILL)
    t0 = time.monotonic()
    c.wait_rereplicated(replicas, victim, timeout_s=60)
    print(f"\nre-replicated {len(affected)} tablets in {time.monotonic() - t0:.1f} s "
          f"(3 s unresponsive timeout)")
    # the new replicas hold the data: every replica of an affected tablet leads in turn
    # (one of them is the new one) and the table is counted through SQL each time
    for tid in affected:
        reps = replicas()[tid]["replicas"]
        for target in reps:
            c.make_leader(tid, target["uuid"], timeout_s=20)
            with c.connect() as conn:
                assert conn.execute("SELECT count(*) FROM s").fetchone()[0] == 300
    # RF is checked against *live* servers: 4 registered, 2 of them dead -> RF 3 refused
    second = next(u for u in tservers if u != victim)
    os.kill(tservers[second]["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while True:
        with c.connect() as conn:
            try:
                conn.execute("CREATE TABLE rf3 (k BIGINT PRIMARY KEY) "
                             "PARTITION BY HASH (k) PARTITIONS 2 WITH (replication_factor = 3)")
            except Exception as e:  # noqa: BLE001 - psycopg's error class
                assert "not enough live tablet servers" in str(e), e
                break
            conn.execute("DROP TABLE rf3")  # the master had not noticed the death yet
        assert time.monotonic() < deadline, "RF 3 accepted with 2 live tablet servers"
        time.sleep(0.5)
    rpc.close()


def test_rereplication_of_a_tablet_whose_log_was_gcd_goes_through_a_tablet_copy(
        cluster4_short_log):
    """The re-replication path of a long-lived table: the leader's log no longer starts at
    entry 1 (flushed, GC'd), so the new empty replica on the fourth server cannot replay it
    and must copy the tablet's files (StartTabletCopy, engine/tserver/tablet_copy.py), with
    real processes; then every replica, the copied one included, serves all rows as
    leader and takes writes."""
    from kudusql.cluster import rpc_client_for
    c = cluster4_short_log
    rpc = rpc_client_for(c.dir, 5)
    master = next(p for p in c.processes() if p["role"] == "master")["addr"]
    with c.connect() as conn:
        conn.execute("CREATE TABLE g (k BIGINT PRIMARY KEY, v TEXT) PARTITION BY HASH (k) "
                     "PARTITIONS 2 WITH (replication_factor = 3)")
        for i in range(120):   # one log entry per statement
            conn.execute("INSERT INTO g VALUES (%s, %s)", (i, "x" * 200))
    tservers = {p["uuid"]: p for p in c.status() if p["role"] == "tserver"}
    for p in tservers.values():
        rpc.call(p["addr"], "flush", {})
    with c.connect() as conn:
        for i in range(120, 200):
            conn.execute("INSERT INTO g VALUES (%s, %s)", (i, "y" * 200))
        conn.execute("UPDATE g SET v = 'z' WHERE k < 10")
    table_id = rpc.call(master, "get_table", {"name": "g"})["table"]["id"]

    def replicas():
        return rpc.call(master, "locations", {"table_id": table_id})["locations"]

    def tablet_status(addr, tid):
        return rpc.call(addr, "status")["tablets"].get(tid)
    # every replica's log has been GC'd past its start (checked, so the copy is forced)
    deadline = time.monotonic() + 20
    while not all(tablet_status(r["addr"], tid)["first_index"] > 2
                  for tid, loc in replicas().items() for r in loc["replicas"]):
        assert time.monotonic() < deadline, "the logs were not GC'd"
        with c.connect() as conn:
            conn.execute("UPDATE g SET v = 'z' WHERE k < 10")
        time.sleep(0.2)
    victim = next(u for u, p in tservers.items() if p["leads"] + p["follows"] > 0)
    spare = {u for u in tservers if u != victim}
    affected = [tid for tid, loc in replicas().items()
                if victim in [r["uuid"] for r in loc["replicas"]]]
    newcomers = {tid: spare - {r["uuid"] for r in loc["replicas"]}
                 for tid, loc in replicas().items() if tid in affected}
    os.kill(tservers[victim]["pid"], signal.SIGKILL)
    c.wait_rereplicated(replicas, victim, timeout_s=60)
    logs = ""
    for name in os.listdir(os.path.join(c.dir, "logs")):
        with open(os.path.join(c.dir, "logs", name), errors="replace") as f:
            logs += f.read()
    for tid in affected:   # each new replica came by a tablet copy, not by the log
        assert f"tablet copy of {tid} from" in logs and "installed" in logs, tid
    for tid in affected:
        reps = replicas()[tid]["replicas"]
        assert {r["uuid"] for r in reps} & newcomers[tid], "no new replica was added"
        for target in reps:
            c.make_leader(tid, target["uuid"], timeout_s=30)
            with c.connect() as conn:
                assert conn.execute("SELECT count(*), count(DISTINCT v) FROM g").fetchone() \
                    == (200, 3)
                conn.execute("INSERT INTO g VALUES (%s, 'n')", (1000 + len(target["uuid"]) +
                                                                 affected.index(tid) * 7919,))
                conn.execute("DELETE FROM g WHERE k >= 1000")
    rpc.close()


def test_three_masters_survive_kill9_of_the_leader_master(cluster3m):
    c = cluster3m
    with c.connect() as conn:
        _create(conn)
        conn.execute("INSERT INTO s VALUES (1, 1, 'a')")
    masters = [p for p in c.status() if p["role"] == "master"]
    leader = next(p for p in masters if p.get("raft_role") == "LEADER")
    os.kill(leader["pid"], signal.SIGKILL)
    t0 = time.monotonic()
    with c.connect() as conn:
        # DDL needs the catalog: a new leader master, elected by the two others
        conn.execute("CREATE TABLE s2 (k INT PRIMARY KEY) WITH (replication_factor = 3)")
        conn.execute("INSERT INTO s2 VALUES (7)")
        ddl_s = time.monotonic() - t0
        assert conn.execute("SELECT count(*) FROM s").fetchone()[0] == 1
        assert conn.execute("SELECT k FROM s2").fetchall() == [(7,)]
    print(f"\nDDL answered {ddl_s:.2f} s after kill -9 of the leader master")
    c.stop()
    c.start(first=False)
    with c.connect() as conn:
        assert conn.execute("SELECT k FROM s2").fetchall() == [(7,)]
        assert sorted(r[0] for r in conn.execute("SHOW TABLES").fetchall()) == ["s", "s2"]
