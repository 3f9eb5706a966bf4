"""The data directory's owner lock between real programs: a running `kudusql serve` keeps a
second server, the shell and the DB-API driver out with 55006 naming the directory and the
server's PID (printed cleanly, exit status non-zero), and the other way round."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kudusql
from tests.wire.real_server import ROOT, RealServer, real_server


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kudusql", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_serve_then_shell_serve_and_dbapi_are_refused(tmp_path):
    d = str(tmp_path / "db")
    with real_server(d) as srv:
        r = _run("shell", "--data-dir", d, "-c", "SELECT 1")
        assert r.returncode != 0
        assert "55006" in r.stderr and d in r.stderr and f"PID {srv.pid}" in r.stderr
        assert "Traceback" not in r.stderr

        r = _run("serve", "--data-dir", d, "--port", "0")
        assert r.returncode == 1
        assert d in r.stderr and f"PID {srv.pid}" in r.stderr
        assert "Traceback" not in r.stderr

        with pytest.raises(kudusql.OperationalError) as e:
            kudusql.connect(d)
        assert e.value.sqlstate == "55006" and f"PID {srv.pid}" in str(e.value)
    # the server is gone: the directory is free again
    with kudusql.connect(d) as c:
        c.cursor().execute("SELECT 1")


def test_dbapi_owner_keeps_a_server_out(tmp_path):
    d = str(tmp_path / "db")
    with kudusql.connect(d):
        with pytest.raises(RuntimeError, match="did not start"):
            RealServer(d)
    with real_server(d) as srv:           # closed: the server may have it
        assert srv.port
