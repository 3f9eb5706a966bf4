"""The PostgreSQL JDBC driver (pgjdbc) against the real server: a Java program
(tests/wire/clients/JdbcClient.java) connects, batches typed inserts, runs a prepared query
past the driver's prepareThreshold (named server statements, binary results), reads
DatabaseMetaData getTables / getColumns / getPrimaryKeys, fetches through a cursor and
checks SQLSTATEs. Skipped without a JDK or the driver jar (Debian: libpostgresql-jdbc-java;
or point KUDUSQL_JDBC_JAR at a pgjdbc jar)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(__file__)
JARS = [os.environ.get("KUDUSQL_JDBC_JAR", ""), "/usr/share/java/postgresql.jar"]


def _jar() -> str | None:
    return next((j for j in JARS if j and os.path.exists(j)), None)


pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("javac") is None or _jar() is None,
    reason="needs a JDK and the PostgreSQL JDBC driver (apt install libpostgresql-jdbc-java)")


def test_jdbc_client(server):
    proc = subprocess.run(
        ["java", "-cp", _jar(), os.path.join(HERE, "clients", "JdbcClient.java"),
         str(server.port)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(line.split("\t", 1) for line in proc.stdout.splitlines() if "\t" in line)
    assert got["product"].startswith("PostgreSQL 15"), got["product"]
    assert got["batch_inserted"] == "20"
    assert got["batch_duplicate"] == "23505"
    assert got["batch_applied"] == "101,102,"     # applied as they ran, none after the error
    reads = got["prepared_reads"].rstrip(";").split(";")
    assert len(reads) == 10
    for i, r in enumerate(reads, 1):
        assert r == f"book {i}|{i}.25|2024-01-0{1 + i % 9} 10:00:00.0", r
    assert got["duplicate"] == "23505"
    assert "books" in got["tables"].split(",")
    assert got["columns"] == ("id:int4:NO,title:text:NO,price:numeric:YES,"
                              "published:timestamp:YES,")
    assert got["primary_key"] == "id,"
    assert got["cursor_rows"] == "20 210"
    assert got["unknown_column"] == "42703"
