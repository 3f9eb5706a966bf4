"""Building the JVM connector's jar (kudusql/spark/jvm.py) without starting Spark: javac
against the pyspark wheel's jars, the DataSourceRegister service file inside, cached by a
hash of the sources; no JDK -> JvmUnavailable saying what to install, and
`connector_jar()` falls back (None) instead of failing."""

from __future__ import annotations

import shutil
import zipfile

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed")

from kudusql.spark import connector_jar  # noqa: E402
from kudusql.spark import jvm  # noqa: E402


def test_jar_builds_once_and_registers_the_format(tmp_path, monkeypatch):
    if shutil.which("javac") is None:
        pytest.skip("no JDK here")
    monkeypatch.setenv("KUDUSQL_CACHE_DIR", str(tmp_path))
    path = jvm.jar_path()
    assert path.startswith(str(tmp_path)) and jvm.source_hash() in path
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        svc = z.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister")
    assert svc.decode().strip() == jvm.MAIN_CLASS
    assert "io/kudusql/spark/KudusqlSource.class" in names
    assert "io/kudusql/spark/DecimalLongVector.class" in names
    mtime = (tmp_path / path.rsplit("/", 1)[1]).stat().st_mtime_ns
    assert jvm.jar_path() == path  # cached: not rebuilt
    assert (tmp_path / path.rsplit("/", 1)[1]).stat().st_mtime_ns == mtime


def test_without_a_jdk_the_reason_is_given(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("KUDUSQL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # no bin/javac there
    monkeypatch.setenv("PATH", str(tmp_path))       # nor on PATH
    with pytest.raises(jvm.JvmUnavailable, match="no javac"):
        jvm.jar_path()
    with caplog.at_level("WARNING", logger="kudusql.spark"):
        assert connector_jar() is None
    assert "PySpark data source only" in caplog.text
