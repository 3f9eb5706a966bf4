"""Fixtures that run a real local cluster (`kudusql cluster start`) in a temporary
directory; every process is killed in teardown, whatever happened."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

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
