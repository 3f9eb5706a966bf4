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
(kudusql/spark/cluster.py; `read_cluster` adds Spark preferred locations).

Importing this package does not import pyspark; the data source classes load on first use.
"""

from __future__ import annotations

from kudusql.spark.env import SparkEnvironmentError, check_environment

__all__ = ["KudusqlDataSource", "KudusqlWriteError", "SparkEnvironmentError",
           "check_environment", "local_session"]


def __getattr__(name: str):
    if name in ("KudusqlDataSource", "KudusqlWriteError"):
        from kudusql.spark import datasource
        return getattr(datasource, name)
    raise AttributeError(name)


def local_session(master: str = "local[2]", app_name: str = "kudusql", **conf):
    """A local SparkSession set up for the data source: this interpreter for the workers,
    Python filter pushdown on, the UI off, 2 shuffle partitions; the data source
    registered. Extra `conf` entries are Spark settings (dots as given)."""
    check_environment()
    from pyspark.sql import SparkSession

    from kudusql.spark.datasource import KudusqlDataSource

    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.python.filterPushdown.enabled", "true"))
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.dataSource.register(KudusqlDataSource)
    return spark
