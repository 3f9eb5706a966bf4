"""kudusql's PySpark data source (docs/spark.md).

    from kudusql.spark import KudusqlDataSource, check_environment, local_session
    check_environment()                       # PYSPARK_PYTHON, Java >= 17
    spark = local_session()                   # or your own, with filter pushdown enabled
    spark.dataSource.register(KudusqlDataSource)
    df = (spark.read.format("kudusql").option("flight", "grpc://127.0.0.1:8815")
          .option("table", "metrics").load())
    df.write.format("kudusql").mode("append").option("flight", ...).option("table", "t") \
        .option("mode", "upsert").save()

On a cluster, `.option("masters", "h:p,...").option("rpc_secret_file", path)` instead of
"flight" (plus `.option("rpc_ca_file", path)` when the cluster's RPC is TLS): executors read and write the tablet servers directly with scan tokens
(kudusql/spark/cluster.py; `read_cluster` adds Spark preferred locations). With the JVM
connector, `.option("masters", ...)` naming the masters' Arrow stream endpoints and no
secret reads and writes through the tablet servers' endpoints instead (docs/spark.md).

Structured Streaming (kudusql/spark/streaming.py): `df.writeStream.format("kudusql")`
with a checkpointLocation is an exactly-once sink; `spark.readStream.format("kudusql")
.option("startingOffsets", "latest" | "earliest" | timestamp)` streams the table's changes
(`_is_deleted`, `_commit_ts`).

Importing this package does not import pyspark; the data source classes load on first use.
"""

from __future__ import annotations

import logging

from kudusql.spark.env import SparkEnvironmentError, check_environment, jvm_view

__all__ = ["KudusqlDataSource", "KudusqlWriteError", "SparkEnvironmentError",
           "check_environment", "local_session", "connector_jar", "register",
           "jvm_connector_loaded"]

log = logging.getLogger("kudusql.spark")


def __getattr__(name: str):
    if name in ("KudusqlDataSource", "KudusqlWriteError"):
        from kudusql.spark import datasource
        return getattr(datasource, name)
    raise AttributeError(name)


def connector_jar() -> str | None:
    """The JVM connector's jar (kudusql/spark/jvm.py: compiled on first use, cached), or
    None with a logged reason where it cannot be built (no JDK): then `format("kudusql")`
    is the PySpark data source alone."""
    from kudusql.spark.jvm import JvmUnavailable, jar_path
    try:
        return jar_path()
    except JvmUnavailable as e:
        log.warning("kudusql: the JVM Spark connector is not available (%s); "
                    'format("kudusql") is the PySpark data source only', e)
        return None


def register(spark) -> None:
    """Register the PySpark data source with a session: under "kudusql_python" when the
    JVM connector (format "kudusql") is on the session's classpath — the connector hands
    reads and writes without "endpoint" (options "flight", "masters") to it — else under
    "kudusql" itself."""
    from kudusql.spark.datasource import KudusqlDataSource, KudusqlPythonDataSource
    from kudusql.spark.errors import install

    install()  # a kudusql error inside a task: KudusqlSparkError, not Java frames
    spark.dataSource.register(KudusqlPythonDataSource if jvm_connector_loaded(spark)
                              else KudusqlDataSource)


def jvm_connector_loaded(spark) -> bool:
    """Whether the session's driver can load the JVM connector (its jar on spark.jars)."""
    jvm = jvm_view(spark.sparkContext)
    try:
        jvm.java.lang.Class.forName("io.kudusql.spark.KudusqlSource", False,
                                    jvm.java.lang.Thread.currentThread()
                                    .getContextClassLoader())
        return True
    except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError: class not found
        return False


def local_session(master: str = "local[2]", app_name: str = "kudusql", jvm: bool = True,
                  **conf):
    """A local SparkSession set up for the data source: this interpreter for the workers,
    Python filter pushdown on, the UI off, 2 shuffle partitions; the JVM connector's jar on
    `spark.jars` (unless `jvm=False` or no JDK can build it) and the PySpark data source
    registered (`register`). Extra `conf` entries are Spark settings (dots as given)."""
    check_environment()
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.python.filterPushdown.enabled", "true"))
    jar = connector_jar() if jvm else None
    if jar:
        b = b.config("spark.jars", ",".join(filter(None, [conf.pop("spark.jars", ""), jar])))
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    register(spark)
    return spark
