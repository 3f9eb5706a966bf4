"""The JVM connector's jar: compiled on first use from the Java sources beside this file.

`java/src/io/kudusql/spark/*.java` is a DataSource V2 connector (format "kudusql") that
reads and writes kudusql's Arrow IPC stream endpoint (wire/arrow_stream.py) inside
Spark's JVM. It is compiled with `javac` against the jars of the installed pyspark wheel
(spark-sql, spark-catalyst, arrow-vector; no Maven, no network) into

    $KUDUSQL_CACHE_DIR or ~/.cache/kudusql / spark-jvm-<hash>.jar

where <hash> covers the sources, the resources and the pyspark version, so an edit or a
new Spark rebuilds it and a cached jar is reused otherwise. `jar_path()` returns it, or
raises JvmUnavailable (no JDK's javac, no pyspark jars, a compile error) with the reason;
`local_session()` then falls back to the PySpark data source with that message.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "java"
SOURCES = HERE / "src"
RESOURCES = HERE / "resources"
MAIN_CLASS = "io.kudusql.spark.KudusqlSource"

_lock = threading.Lock()


class JvmUnavailable(RuntimeError):
    """The JVM connector cannot be built here; the message says why."""


def pyspark_jars() -> Path:
    try:
        import pyspark
    except ImportError:
        raise JvmUnavailable("pyspark is not installed") from None
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    if not jars.is_dir():
        raise JvmUnavailable(f"pyspark has no jars directory at {jars}")
    return jars


def find_javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    javac = shutil.which("javac")
    if javac is None:
        raise JvmUnavailable("no javac (a JDK >= 17 is needed to build the JVM connector: "
                             "apt-get install openjdk-17-jdk-headless, or set JAVA_HOME)")
    return javac


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def source_hash() -> str:
    """Hash of the Java sources, the resources and the pyspark version."""
    import pyspark
    h = hashlib.sha256(pyspark.__version__.encode())
    for root in (SOURCES, RESOURCES):
        for p in _files(root):
            h.update(str(p.relative_to(HERE)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    d = os.environ.get("KUDUSQL_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "kudusql")
    return Path(d)


def jar_path(build: bool = True) -> str:
    """The connector's jar, compiled now if no cached one matches the sources."""
    jars = pyspark_jars()
    target = cache_dir() / f"spark-jvm-{source_hash()}.jar"
    if target.is_file():
        return str(target)
    if not build:
        raise JvmUnavailable(f"the JVM connector is not built ({target})")
    with _lock:
        if not target.is_file():
            _build(jars, target)
    return str(target)


def _build(jars: Path, target: Path) -> None:
    javac = find_javac()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kudusql-jvm-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        srcs = [str(p) for p in _files(SOURCES) if p.suffix == ".java"]
        cmd = [javac, "--release", "17", "-nowarn", "-encoding", "UTF-8", "-d", str(classes),
               "-cp", str(jars / "*"), *srcs]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise JvmUnavailable(f"cannot run javac: {e}") from None
        if out.returncode != 0:
            raise JvmUnavailable("the JVM connector does not compile against pyspark's jars:\n"
                                 + (out.stderr or out.stdout)[-4000:])
        part = Path(tmp) / "connector.jar"
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n"
                                               "Created-By: kudusql\r\n\r\n")
            for root in (classes, RESOURCES):
                for p in _files(root):
                    z.write(p, str(p.relative_to(root)))
        # atomic: a concurrent builder (another process) either sees no jar or a whole one
        fd, tmpjar = tempfile.mkstemp(dir=target.parent, suffix=".jar.part")
        os.close(fd)
        shutil.copyfile(part, tmpjar)
        os.replace(tmpjar, target)
