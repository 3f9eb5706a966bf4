"""The shell in a real terminal: tmux runs `python -m shell` (with slow `slow_*` tables, see
slow_shell.py) in a pty; keys go in with send-keys and the screen comes back with
capture-pane. Skipped where tmux is not installed."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from shell.backend import EmbeddedBackend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, socket: str):
        self.socket = socket

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def keys(self, *keys: str, literal: bool = False) -> None:
        self("send-keys", "-t", "sh", *(["-l"] if literal else []), *keys)

    def type(self, text: str) -> None:
        if text.endswith(";"):          # tmux reads a trailing `;` as a command separator
            text = text[:-1] + "\\;"
        self.keys(text, literal=True)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "sh")

    def wait_for(self, needle: str, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            s = self.screen()
            if needle in s:
                return s
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not on the screen:\n{s}")
            time.sleep(0.1)


@pytest.fixture
def tmux(data_dir, tmp_path):
    """The shell on `data_dir` plus 60 more rows and a `slow_t` table, in a tmux pane."""
    b = EmbeddedBackend(data_dir, maintenance=False)    # closed before the child opens it
    values = ", ".join(f"('h{i:02d}', '2025-02-01', {i}, NULL)" for i in range(60))
    b.execute(f"INSERT INTO metrics VALUES {values}")
    b.execute("CREATE TABLE slow_t (k INT NOT NULL, PRIMARY KEY (k)) "
              "PARTITION BY HASH (k) PARTITIONS 4")
    b.execute("INSERT INTO slow_t VALUES " + ", ".join(f"({k})" for k in range(100)))
    b.close()
    t = Tmux(str(tmp_path / "tmux.sock"))      # a private tmux server, gone with tmp_path
    env = {"PYTHONPATH": ROOT, "KUDUSQL_HISTORY": str(tmp_path / "hist"),
           "PAGER": "less -SRXF", "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    cmd = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), sys.executable,
                    os.path.join(ROOT, "tests", "shell", "slow_shell.py"),
                    "-D", data_dir, "--no-maintenance"])
    t("-f", "/dev/null", "new-session", "-d", "-s", "sh", "-x", "100", "-y", "30",
      f"env {cmd}; echo EXITED $?; sleep 30")
    try:
        t.wait_for("db=>")
        yield t
    finally:
        t("kill-server")


def test_in_a_real_terminal(tmux):
    # completion of a table name: the menu shows it, Tab takes it
    tmux.type("SELECT count(*) AS n FROM met")
    # the menu needs the background metadata refresh: slow on a loaded machine
    tmux.wait_for("metrics  table", timeout=60)
    tmux.keys("Tab")
    tmux.type(";")
    tmux.keys("Enter")
    s = tmux.wait_for("(1 row)")
    assert "db=> SELECT count(*) AS n FROM metrics;" in s and "\n 63\n" in s

    # \d and a multi-line statement
    tmux.type("\\d metrics")
    tmux.keys("Enter")
    tmux.wait_for("Tablets: 4, replication factor 1")
    tmux.keys("C-l")
    tmux.type("SELECT host")
    tmux.keys("Enter")
    tmux.type("FROM metrics WHERE host = 'b';")
    tmux.keys("Enter")
    # the typed text, not "(1 row)": on a loaded machine the screen read before Ctrl-L took
    # effect still held the count's "(1 row)"
    s = tmux.wait_for("db=> SELECT host\ndb-> FROM metrics WHERE host = 'b';")
    tmux.wait_for("(1 row)")

    # Ctrl-C cancels a long query (the progress line shows first) and the shell stays
    tmux.keys("C-l")
    tmux.type("SELECT * FROM slow_t a, slow_t b;")
    tmux.keys("Enter")
    tmux.wait_for("Ctrl-C to cancel")
    tmux.keys("C-c")
    tmux.wait_for("canceling statement due to user request (SQLSTATE 57014)")

    # a result taller than the screen opens the pager; q returns to the shell
    tmux.keys("C-l")
    tmux.type("SELECT host FROM metrics ORDER BY host;")
    tmux.keys("Enter")
    s = tmux.wait_for(" h20")
    assert "(63 rows)" not in s                  # less shows the first screen only
    tmux.keys("q")
    tmux.wait_for("db=>")

    # Ctrl-D quits with status 0
    tmux.keys("C-d")
    tmux.wait_for("EXITED 0")
