"""One owner per data directory (engine.fs.DirectoryLock), with real processes: a second
process is refused with 55006 naming the directory and the owner's PID; a lock left by a
process killed with SIGKILL is taken over; in one process, reopen after close works and two
live opens are refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from engine.catalog import Catalog
from engine.fs import LOCK_FILE, DirectoryLocked

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _holder(path) -> subprocess.Popen:
    """A process that opens the catalog, says so, and waits to be killed."""
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {ROOT!r})
        from engine.catalog import Catalog
        cat = Catalog.open({str(path)!r})
        print("open", flush=True)
        time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "open"
    return p


def test_second_process_is_refused_naming_dir_and_pid(tmp_path):
    p = _holder(tmp_path)
    try:
        with pytest.raises(DirectoryLocked) as e:
            Catalog.open(str(tmp_path))
        assert e.value.sqlstate == "55006"
        assert str(tmp_path) in str(e.value) and f"PID {p.pid}" in str(e.value)
    finally:
        p.kill()
        p.wait(10)


def test_stale_lock_of_killed_process_is_taken_over(tmp_path):
    p = _holder(tmp_path)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    with open(tmp_path / LOCK_FILE) as f:
        assert f.read().strip() == str(p.pid)        # the dead owner's PID is still there
    cat = Catalog.open(str(tmp_path))
    try:
        with open(tmp_path / LOCK_FILE) as f:
            assert f.read().strip() == str(os.getpid())
    finally:
        cat.close()


def test_same_process_reopen_after_close_and_refuse_two_live_opens(tmp_path):
    cat = Catalog.open(str(tmp_path))
    with pytest.raises(DirectoryLocked, match="already open in this process"):
        Catalog.open(str(tmp_path / "." ))          # same directory, another spelling
    cat.close()
    cat2 = Catalog.open(str(tmp_path))               # reopen after close works
    cat2.close()


def test_failed_open_releases_the_lock(tmp_path):
    (tmp_path / "catalog.json").write_text("{not json")
    with pytest.raises(Exception):
        Catalog.open(str(tmp_path))
    (tmp_path / "catalog.json").unlink()
    Catalog.open(str(tmp_path)).close()
