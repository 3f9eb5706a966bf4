"""Spark on a kudusql cluster: scan tokens, executors reading and writing tablet servers.

Kudu's Spark integration (paper §5.1) plans a scan on the driver as *scan tokens* — one
per tablet, each naming the table, the tablet, the projection, the pushed predicates and
the snapshot timestamp, plus where the tablet's replicas are — and each executor turns its
token back into a scanner that reads the tablet servers directly. No single front end
sits between Spark and the data. Here:

    driver                                         executor (Python worker)
    scan_tokens(catalog, table, columns,           ScanToken.deserialize(bytes)
      predicates, snapshot=None)                     .scan(executor_catalog(...))
      snapshot T: the tablets' latest committed     -> RemoteTablet.scan at T (DoGet to a
      timestamp, made safe (one cut for all)           tablet server: fault tolerant,
      partitions pruned by the predicates              CLOSEST_REPLICA: a replica on the
      one token per remaining tablet, with the         executor's host first, followers
      replicas' addresses                              once safe at T; engine/client)

`ScanToken` is a frozen dataclass serialised with the RPC codec (JSON + blobs, no pickle;
predicates keep their dates, decimals, bytes). An executor's `executor_catalog` is one
`RemoteCatalog` per Python worker process (masters, secret file, replica selection and CA
file as key), which asks a master for the table's metadata and tablet locations once and
then talks to tablet servers only. On a cluster whose RPC is TLS (engine/rpc) the executors
need the CA certificate (`rpc_ca_file`; no client certificate: the secret authenticates).

Two ways to use it from Spark:
- the data source, `format("kudusql").option("masters", "h:p,...")
  .option("rpc_secret_file", path)` [`.option("rpc_ca_file", path)` with TLS]
  (datasource.py): one input partition per tablet,
  writes from every executor straight to the tablet servers (`ClusterWriter`). PySpark's
  Python Data Source API has no preferred locations (its JVM side,
  PythonInputPartition, reports none), so Spark schedules these tasks anywhere; the
  partition still carries its replicas' hosts and the executor reads the closest one.
- `read_cluster(spark, masters, secret_file, table, ..., rpc_ca_file=None)`: the same
  tokens as an RDD made
  with SparkContext.makeRDD's location preferences — one partition per tablet whose
  preferred locations are the replica hosts, so Spark's scheduler places each task on a
  host holding the tablet — turned into a DataFrame (row by row: PySpark's Arrow path
  from an RDD, mapInArrow, needs pandas).
"""

from __future__ import annotations

import atexit
import dataclasses
import threading
from typing import Iterator, Sequence

import pyarrow as pa

from engine import errors
from engine.client.client import RemoteCatalog, RemoteTablet
from engine.client.scanner import CLOSEST_REPLICA
from engine.rpc import codec
from engine.rpc.rpc import load_tls, read_secret_file
from engine.tablet.scan_spec import BoundPredicate, ColumnPredicate


@dataclasses.dataclass(frozen=True)
class ScanToken:
    """One tablet's share of a planned scan (see the module docstring)."""

    table: str
    table_id: str
    tablet_id: str
    partition: int
    columns: tuple[str, ...]
    predicates: tuple[ColumnPredicate, ...]
    snapshot: int
    replicas: tuple[tuple[str, str], ...]  # (server uuid, RPC address) at planning time

    def serialize(self) -> bytes:
        return codec.encode({"v": 1, "table": self.table, "table_id": self.table_id,
                             "tablet_id": self.tablet_id, "partition": self.partition,
                             "columns": list(self.columns),
                             "predicates": list(self.predicates),
                             "snapshot": self.snapshot,
                             "replicas": [list(r) for r in self.replicas]})

    @classmethod
    def deserialize(cls, data: bytes) -> "ScanToken":
        d = codec.decode(data)
        if d.get("v") != 1:
            raise errors.InvalidArgument(f"unknown scan token version {d.get('v')!r}")
        return cls(d["table"], d["table_id"], d["tablet_id"], int(d["partition"]),
                   tuple(d["columns"]), tuple(d["predicates"]), int(d["snapshot"]),
                   tuple(tuple(r) for r in d["replicas"]))

    def hosts(self) -> list[str]:
        """The replicas' hosts (Spark preferred locations)."""
        return sorted({a.rsplit(":", 1)[0].strip("[]") for _, a in self.replicas})

    def scan(self, catalog: RemoteCatalog) -> Iterator[pa.RecordBatch]:
        """The scanner this token describes, reading the tablet servers directly."""
        meta = catalog.table_metadata(self.table_id)
        if not (0 <= self.partition < len(meta.tablet_ids)) or \
                meta.tablet_ids[self.partition] != self.tablet_id:
            raise errors.InvalidArgument(
                f'table "{self.table}" was repartitioned or re-created since the scan was '
                f"planned (tablet {self.tablet_id} is gone); plan the scan again")
        rt = RemoteTablet(catalog, meta, self.tablet_id)
        return rt.scan(list(self.columns), list(self.predicates), self.snapshot)


def bindable(schema, predicates: Sequence[ColumnPredicate]) -> list[bool]:
    """Which predicates the table's schema accepts (the rest stay with Spark)."""
    out = []
    for p in predicates:
        try:
            BoundPredicate(p, schema.column(p.column))
            out.append(True)
        except errors.EngineError:
            out.append(False)
    return out


def scan_tokens(catalog: RemoteCatalog, table: str, columns: Sequence[str] | None = None,
                predicates: Sequence[ColumnPredicate] = (), snapshot: int | None = None
                ) -> tuple[int, list[ScanToken]]:
    """(snapshot T, one token per tablet the predicates do not prune), planned on the
    driver. Without `snapshot`, T is the largest latest-committed timestamp of the tablets,
    made safe on each (as Table picks one for a statement): one consistent cut."""
    meta = catalog.get_table(table)
    schema = meta.schema
    names = list(columns) if columns is not None else schema.names
    for n in names:
        schema.column(n)
    for p in predicates:
        BoundPredicate(p, schema.column(p.column))
    keep = meta.partition_schema.prune(list(predicates))
    tablets = [RemoteTablet(catalog, meta, meta.tablet_ids[i]) for i in keep]
    if snapshot is None:
        snapshot = max([t.current_timestamp() for t in tablets] + [catalog.client.last_ts])
        for t in tablets:
            t.wait_safe(snapshot)
    tokens = []
    for i in keep:
        tid = meta.tablet_ids[i]
        loc = catalog.locations(tid, meta.id)
        tokens.append(ScanToken(meta.name, meta.id, tid, i, tuple(names), tuple(predicates),
                                int(snapshot), tuple(tuple(r) for r in loc.replicas)))
    return int(snapshot), tokens


# -- executors -----------------------------------------------------------------------------
_catalogs: dict[tuple, RemoteCatalog] = {}
_lock = threading.Lock()


def executor_catalog(masters: str | Sequence[str], secret_file: str,
                     replica_selection: str = CLOSEST_REPLICA,
                     rpc_ca_file: str | None = None) -> RemoteCatalog:
    """This process's client of the cluster (one per masters/secret/selection/CA file);
    `rpc_ca_file`: the CA certificate of a cluster whose RPC is TLS."""
    ms = tuple(m.strip() for m in (masters.split(",") if isinstance(masters, str)
                                   else masters) if m.strip())
    key = (ms, secret_file, replica_selection, rpc_ca_file or None)
    cat = _catalogs.get(key)
    if cat is None:
        with _lock:
            cat = _catalogs.get(key)
            if cat is None:
                cat = _catalogs[key] = RemoteCatalog.connect(
                    list(ms), read_secret_file(secret_file),
                    replica_selection=replica_selection,
                    tls=load_tls(ca_file=rpc_ca_file) if rpc_ca_file else None)
    return cat


@atexit.register
def _close_catalogs() -> None:
    for c in list(_catalogs.values()):
        try:
            c.close()
        except Exception:  # noqa: BLE001 - exiting
            pass
    _catalogs.clear()


def cluster_options(options) -> tuple[str, str, str, str, str | None]:
    """(masters, secret file, table, replica selection, CA file or None) of a data source
    read or write on a cluster (its options: see docs/spark.md)."""
    masters, table = options.get("masters"), options.get("table")
    secret = options.get("rpc_secret_file")
    if not table or not secret:
        raise ValueError('on a cluster the kudusql data source needs .option("masters", '
                         '"host:port,..."), .option("rpc_secret_file", path) and '
                         '.option("table", name) (and .option("rpc_ca_file", path) when '
                         'its RPC is TLS); the masters\' Arrow stream endpoints without a '
                         'secret are read by the JVM connector, which needs a JDK')
    return (masters, secret, table, str(options.get("replica_selection", "CLOSEST_REPLICA")),
            options.get("rpc_ca_file") or None)


def cluster_catalog(options) -> RemoteCatalog:
    """This process's client of the cluster the data source options name."""
    from engine.client.scanner import parse_replica_selection
    masters, secret, _, sel, ca = cluster_options(options)
    return executor_catalog(masters, secret, parse_replica_selection(sel), ca)


# -- an RDD with preferred locations --------------------------------------------------------
def tokens_rdd(spark, tokens: Sequence[ScanToken]):
    """An RDD of serialised tokens, one partition per token, each partition's preferred
    locations the token's replica hosts (SparkContext.makeRDD with location preferences,
    which PySpark does not expose: called through the JVM gateway)."""
    from pyspark.rdd import RDD
    from pyspark.serializers import CPickleSerializer

    from kudusql.spark.env import jvm_view, scala_spark_context

    sc = spark.sparkContext
    jvm = jvm_view(sc)
    ser = CPickleSerializer()
    pairs = jvm.java.util.ArrayList()
    for t in tokens:
        hosts = jvm.java.util.ArrayList()
        for h in t.hosts():
            hosts.add(h)
        pairs.add(jvm.scala.Tuple2(bytearray(ser.dumps(t.serialize())),
                                   jvm.scala.jdk.javaapi.CollectionConverters.asScala(
                                       hosts).toSeq()))
    seq = jvm.scala.jdk.javaapi.CollectionConverters.asScala(pairs).toSeq()
    tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("[B"))
    jrdd = scala_spark_context(sc).makeRDD(seq, tag)
    return RDD(jrdd.toJavaRDD(), sc, ser)


def preferred_locations(rdd) -> list[list[str]]:
    """What Spark's scheduler sees as each partition's preferred hosts."""
    from kudusql.spark.env import scala_rdd, scala_spark_context

    ssc, jr = scala_spark_context(rdd.context), scala_rdd(rdd)
    return [list(ssc.getPreferredLocs(jr, i).toList().mkString(",").split(","))
            if ssc.getPreferredLocs(jr, i).size() else []
            for i in range(rdd.getNumPartitions())]


def read_cluster(spark, masters: str, secret_file: str, table: str,
                 columns: Sequence[str] | None = None,
                 predicates: Sequence[ColumnPredicate] = (), snapshot: int | None = None,
                 rpc_ca_file: str | None = None):
    """A DataFrame of `table` read by executors from the tablet servers, one partition per
    tablet placed on the replicas' hosts (see the module docstring). Returns (DataFrame,
    snapshot, the token RDD)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    cat = executor_catalog(masters, secret_file, rpc_ca_file=rpc_ca_file)
    snap, tokens = scan_tokens(cat, table, columns, predicates, snapshot)
    meta = cat.get_table(table)
    names = list(columns) if columns is not None else meta.schema.names
    arrow = meta.schema.arrow_schema(names)
    rdd = tokens_rdd(spark, tokens)

    def read(raw: bytes):
        tok = ScanToken.deserialize(bytes(raw))
        for b in tok.scan(executor_catalog(masters, secret_file, rpc_ca_file=rpc_ca_file)):
            # Rows, one Python tuple each: PySpark builds a DataFrame from an RDD row by
            # row (its Arrow path, mapInArrow, needs pandas, which kudusql does not).
            yield from zip(*(c.to_pylist() for c in b.columns))

    df = spark.createDataFrame(rdd.flatMap(read),
                               from_arrow_schema(arrow, prefer_timestamp_ntz=True))
    return df, snap, rdd
