"""Environment checks for running the PySpark data source (no pyspark import here), and
the three places kudusql reaches PySpark's private handles on the JVM."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

MIN_JAVA = 17


class SparkEnvironmentError(RuntimeError):
    """PySpark or Java is missing or too old; the message says what to install or set."""


def java_version(java: str) -> int:
    """The major version `java -version` reports (1.8 -> 8)."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SparkEnvironmentError(f"cannot run {java} -version: {e}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        raise SparkEnvironmentError(f"cannot read the Java version from {java} -version: "
                                    f"{(out.stderr or out.stdout).strip()!r}")
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def find_java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise SparkEnvironmentError(f"JAVA_HOME={home} has no bin/java; point JAVA_HOME "
                                        f"at a JDK/JRE >= {MIN_JAVA} or unset it")
        return java
    java = shutil.which("java")
    if java is None:
        raise SparkEnvironmentError(f"PySpark needs Java >= {MIN_JAVA}: install a JDK (e.g. "
                                    f"apt-get install openjdk-{MIN_JAVA}-jre-headless) or set "
                                    f"JAVA_HOME")
    return java


def check_environment(set_python: bool = True) -> dict:
    """Check that Spark can run here, and make its Python workers use this interpreter.

    Sets PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON to `sys.executable` when unset (the workers
    must import kudusql and pyarrow: the venv's interpreter), refuses a PYSPARK_PYTHON that
    does not exist, and checks pyspark >= 4 and Java >= 17 (JAVA_HOME, else `java` on
    PATH). Returns {"pyspark", "java", "java_version", "python"}; raises
    SparkEnvironmentError with what to do otherwise."""
    try:
        import pyspark
    except ImportError:
        raise SparkEnvironmentError(
            "pyspark is not installed: pip install 'kudusql[spark]' (pyspark>=4)") from None
    if int(pyspark.__version__.split(".")[0]) < 4:
        raise SparkEnvironmentError(f"pyspark {pyspark.__version__} is too old: the Python "
                                    f"Data Source API needs pyspark>=4")
    if set_python:
        for var in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            os.environ.setdefault(var, sys.executable)
    py = os.environ.get("PYSPARK_PYTHON", sys.executable)
    if not (os.access(py, os.X_OK) or shutil.which(py)):
        raise SparkEnvironmentError(f"PYSPARK_PYTHON={py} is not an executable interpreter")
    java = find_java()
    v = java_version(java)
    if v < MIN_JAVA:
        raise SparkEnvironmentError(f"{java} is Java {v}; pyspark {pyspark.__version__} "
                                    f"needs Java >= {MIN_JAVA} (set JAVA_HOME)")
    return {"pyspark": pyspark.__version__, "java": java, "java_version": v, "python": py}


# -- PySpark's doors to the JVM -------------------------------------------------------------
# PySpark exposes no public way to call JVM classes or the Scala SparkContext; these three
# read its private handles, and are the only places kudusql does.

def jvm_view(sc):
    """The py4j view of the driver's JVM (`SparkContext._jvm`): `jvm.java.util.ArrayList()`."""
    return sc._jvm


def scala_spark_context(sc):
    """The Scala SparkContext behind a PySpark one (`sc._jsc.sc()`)."""
    return sc._jsc.sc()


def scala_rdd(rdd):
    """The Scala RDD behind a PySpark RDD (`rdd._jrdd.rdd()`)."""
    return rdd._jrdd.rdd()
