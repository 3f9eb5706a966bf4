"""psql (libpq 15) as a subprocess: a query, an error drawn with a caret from the P field,
multi-statement input, COPY through \\copy. The \\d commands belong to pg_catalog."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

PSQL = shutil.which("psql")
pytestmark = pytest.mark.skipif(PSQL is None, reason="psql is not installed")


def psql(server, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PGCONNECT_TIMEOUT="10", PSQLRC="/dev/null")
    return subprocess.run([PSQL, "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U",
                           "kudusql", *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=30, check=False)


def test_select_1(server):
    r = psql(server, "-c", "select 1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # PostgreSQL names the column ?column?; the planner calls it 1 (not the wire's choice)
    assert [ln.strip() for ln in lines[2:4]] == ["1", "(1 row)"] and set(lines[1]) == {"-"}


def test_error_with_caret(server):
    r = psql(server, "-c", "select nosuch from missing_table")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        'ERROR:  relation "missing_table" does not exist',
        "LINE 1: select nosuch from missing_table",
        "                           ^"]


def test_script_with_transaction_and_copy(server, tmp_path):
    data = tmp_path / "in.csv"
    data.write_text("1,one\n2,two\n3,\n")
    out = tmp_path / "out.txt"
    script = f"""
CREATE TABLE ps (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) PARTITIONS 2;
\\copy ps from '{data}' csv
BEGIN;
SELECT k, v FROM ps ORDER BY k;
COMMIT;
\\copy (select k, v from ps order by k) to '{out}'
"""
    r = psql(server, "-v", "ON_ERROR_STOP=1", "-A", "-t", stdin=script)
    assert r.returncode == 0, r.stderr
    assert "COPY 3" in r.stdout and "1|one\n2|two\n3|" in r.stdout
    assert out.read_text() == "1\tone\n2\ttwo\n3\t\\N\n"
