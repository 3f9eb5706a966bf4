"""Fixtures that run a real local cluster (`kudusql cluster start`) in a temporary
directory; every process is killed in teardown, whatever happened."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# fast failure detection for tests: 50 ms ticks, elections after 0.5-1 s of silence
TIMING = ["--tick-ms", "50", "--election-ticks", "10", "--heartbeat-ms", "250"]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def kudusql(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kudusql.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


class LocalCluster:
    def __init__(self, path: str, tservers: int = 3, extra: tuple = ()):
        self.dir = path
        self.port = free_port()
        self.tservers = tservers
        self.extra = list(extra)

    def start(self, first: bool = True) -> str:
        args = ["cluster", "start", "--data-dir", self.dir, "--timeout", "60", *TIMING]
        if first:
            args += ["--tservers", str(self.tservers), "--port", str(self.port), *self.extra]
        r = kudusql(*args)
        assert r.returncode == 0, r.stdout + r.stderr + self.logs()
        return r.stdout

    def stop(self) -> None:
        kudusql("cluster", "stop", "--data-dir", self.dir, timeout=60)

    def status(self) -> list[dict]:
        r = kudusql("cluster", "status", "--data-dir", self.dir, "--json", timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def processes(self) -> list[dict]:
        try:
            with open(os.path.join(self.dir, "cluster.json")) as f:
                return json.load(f)["processes"]
        except FileNotFoundError:
            return []

    def kill_all(self) -> None:
        for p in self.processes():
            try:
                os.kill(p["pid"], signal.SIGKILL)
            except (ProcessLookupError, KeyError, TypeError):
                pass

    def logs(self) -> str:
        out = []
        d = os.path.join(self.dir, "logs")
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                with open(os.path.join(d, name), errors="replace") as f:
                    out.append(f"--- {name}\n" + f.read()[-3000:])
        return "\n".join(out)

    def make_leader(self, tid: str, target: str, timeout_s: float = 30) -> None:
        """Make the replica of tablet `tid` on tablet server `target` (uuid) its leader:
        ask whichever live replica leads to transfer leadership until `target` leads.
        Servers that are restarting or refuse (target not caught up yet) are asked again."""
        from kudusql.cluster import rpc_client_for
        rpc = rpc_client_for(self.dir, 5)
        try:
            servers = {p["uuid"]: p["addr"] for p in self.status()
                       if p["role"] == "tserver" and p["alive"]}
            deadline = time.monotonic() + timeout_s
            while True:
                roles = {}
                for u, a in servers.items():
                    try:
                        roles[u] = rpc.call(a, "status")["tablets"].get(tid, {}).get("role")
                    except Exception:  # noqa: BLE001 - restarting: ask again
                        pass
                if roles.get(target) == "LEADER":
                    return
                leader = next((u for u, r in roles.items() if r == "LEADER"), None)
                assert time.monotonic() < deadline, f"no leadership transfer for {tid}"
                if leader is not None:
                    try:
                        rpc.call(servers[leader], "transfer_leader",
                                 {"tablet": tid, "target": target})
                    except Exception:  # noqa: BLE001 - not caught up yet: retry
                        pass
                time.sleep(0.3)
        finally:
            rpc.close()

    def wait_rereplicated(self, replicas, victim: str, timeout_s: float = 60) -> None:
        """Wait until every tablet in `replicas()` (the master's locations) has three live
        replicas, none of them on the dead server `victim`."""
        deadline = time.monotonic() + timeout_s
        while True:
            locs = replicas()
            if all(len(loc["replicas"]) == 3
                   and victim not in [r["uuid"] for r in loc["replicas"]]
                   and all(r["live"] for r in loc["replicas"]) for loc in locs.values()):
                return
            assert time.monotonic() < deadline, f"not re-replicated in {timeout_s} s: {locs}"
            time.sleep(0.5)

    def connect(self):
        import psycopg
        return psycopg.connect(host="127.0.0.1", port=self.port, user="kudusql",
                               dbname="kudusql", autocommit=True, connect_timeout=10)


@pytest.fixture
def cluster(tmp_path):
    yield from _run(LocalCluster(str(tmp_path / "cluster")))


@pytest.fixture
def cluster4(tmp_path):
    """Four tablet servers; a server silent for 3 s counts as dead."""
    yield from _run(LocalCluster(str(tmp_path / "cluster"), 4,
                                 ("--tserver-unresponsive-timeout", "3")))


@pytest.fixture
def cluster4_short_log(tmp_path):
    """cluster4 whose replicas keep only 20 log entries for a lagging peer, in 4 KB log
    segments: a new replica cannot catch up from the log and needs a tablet copy."""
    yield from _run(LocalCluster(str(tmp_path / "cluster"), 4,
                                 ("--tserver-unresponsive-timeout", "3",
                                  "--log-retention-entries", "20",
                                  "--wal-segment-bytes", "4096")))


@pytest.fixture
def cluster3m(tmp_path):
    """Three masters (the sys catalog replicated by Raft), three tablet servers."""
    yield from _run(LocalCluster(str(tmp_path / "cluster"), 3, ("--masters", "3")))


def _run(c: LocalCluster):
    try:
        c.start()
        yield c
    finally:
        try:
            c.stop()
        finally:
            c.kill_all()
