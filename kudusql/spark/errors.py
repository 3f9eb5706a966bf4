"""Errors of a Spark task in SQL's words: `KudusqlSparkError`, not Java frames.

A kudusql error raised inside a Spark task (a scan's error trailer, a write the server
refused, a server gone mid-stream) reaches the driver as a SparkException "Job aborted
due to stage failure: ..." whose cause chain holds the connector's KudusqlException
("kudusql: MESSAGE (SQLSTATE XXXXX)"). PySpark converts only the JVM exception classes it
knows (pyspark.errors.exceptions.captured.convert_exception) and re-raises everything
else as a Py4JJavaError carrying the whole Java stack trace. `install()` wraps that
conversion so that such a job failure is raised as `KudusqlSparkError(message, sqlstate)`
with the connector's message alone; every other error is converted as before. It is a
wrapper around one PySpark function (checked to exist: without it nothing is installed
and errors look as they did), called by `kudusql.spark.register`.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger("kudusql.spark")

_CONNECTOR_ERROR = "io.kudusql.spark.KudusqlException"
_SQLSTATE = re.compile(r"\(SQLSTATE ([0-9A-Z]{5})\)\s*$")


class KudusqlSparkError(RuntimeError):
    """A kudusql error raised inside a Spark task: `str()` is the connector's message
    ("kudusql: ... (SQLSTATE XXXXX)"), `.sqlstate` its SQLSTATE."""

    def __init__(self, message: str):
        super().__init__(message)
        m = _SQLSTATE.search(message)
        self.sqlstate = m.group(1) if m else "XX000"


def connector_message(java_exception, depth: int = 20) -> str | None:
    """The message of the first KudusqlException in a Java exception's cause chain (and,
    for a job failure, the failed task's exception), or None."""
    e = java_exception
    for _ in range(depth):
        if e is None:
            return None
        if e.getClass().getName() == _CONNECTOR_ERROR:
            return str(e.getMessage())
        e = e.getCause()
    return None


def install() -> bool:
    """Wrap PySpark's JVM-exception conversion once (see the module docstring)."""
    try:
        from pyspark.errors.exceptions import captured
    except ImportError:
        return False
    original = getattr(captured, "convert_exception", None)
    if original is None or getattr(original, "kudusql_wrapped", False):
        return original is not None

    def convert_exception(e):
        converted = original(e)
        if isinstance(converted, captured.UnknownException):
            try:
                msg = connector_message(e)
            except Exception:  # noqa: BLE001 - the gateway is going away: convert as before
                msg = None
            if msg is not None:
                return KudusqlSparkError(msg)
        return converted

    convert_exception.kudusql_wrapped = True  # type: ignore[attr-defined]
    captured.convert_exception = convert_exception
    return True
