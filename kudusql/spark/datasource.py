"""The `kudusql` PySpark data source: Kudu's Spark integration over Arrow Flight.

Kudu's connector (paper §5.1) makes one Spark partition per tablet, pushes column
projections and simple predicates into the tablet scans, and reads every partition at one
snapshot. Here, with PySpark's Python Data Source API (pyspark >= 4.1 for pushFilters):

    driver (planning)                          executors
    schema()      Flight get_schema             -
    pushFilters() EqualTo, <, <=, >, >=, In,     -
                  IsNull, IsNotNull,
                  EqualNullSafe -> engine
                  ColumnPredicates (the server
                  binds them first; a filter it
                  refuses stays with Spark)
    partitions()  Flight get_flight_info:        read(p): do_get(ticket) -> Arrow batches
                  snapshot T chosen once, one    (the tablet's scan at T, predicates and
                  partition per unpruned tablet   projection applied in the engine)
    writer()      -                              write(batches): do_put, insert | upsert;
    commit()      sums the per-task summaries;   the server answers applied / failed per
                  raises KudusqlWriteError if      code / the first row errors
                  any row failed

Pushed filters are evaluated exactly by the engine, so they are not returned to Spark
(Kudu's connector does the same). Not pushed: Not, string LIKE forms, OR, nested fields,
lower bounds on FLOAT / DOUBLE columns and NaN / infinite literals (`_filter_to_predicate`).

Options: `flight` (grpc://host:port, required), `table` (required); read: `snapshot`
(a timestamp from the Flight action current_timestamp: time travel), `pushdown`
("true" turns filter pushdown on; it needs spark.sql.python.filterPushdown.enabled=true,
and is opt-in because of a PySpark 4.3 caching problem: a DataFrame that had filters
pushed reuses that planned scan for a later query on it that pushes none — load a fresh
DataFrame per query with pushdown on; see docs/spark.md); write: `mode` (insert,
the default, or upsert), `ignore_row_errors` ("true": report failed rows in the log only).
mode("overwrite") is refused: Kudu's connector has no truncate either.

On a cluster (`masters` = "host:port,..." and `rpc_secret_file` instead of `flight`;
optional `replica_selection`, CLOSEST_REPLICA by default; `rpc_ca_file`, the CA certificate
of a cluster whose RPC is TLS, e.g. D/rpc-cert.pem of `cluster start --rpc-tls`, readable by
the executors): the driver plans scan tokens
(kudusql/spark/cluster.py: snapshot, pruning, one token per tablet with its replicas'
hosts), pushed filters are checked against the table's schema on the driver, and every
executor reads its tablet from the tablet servers and writes its rows to the tablet leaders
through the client library — no Flight or SQL front end in between (`ClusterReader`,
`ClusterWriter`). PySpark cannot pass preferred locations from a Python data source;
`kudusql.spark.cluster.read_cluster` does, through an RDD.

Streaming (`streamWriter`, `streamReader`) is kudusql/spark/streaming.py: an exactly-once
sink and a change-data source, on both paths; `schema()` adds the change columns
(`_is_deleted`, `_commit_ts`) when the options name a change stream's "startingOffsets".
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as fl
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.types import DoubleType, FloatType, StructType

from kudusql.spark.flight_client import action, command, put
from wire.flight import value_to_json

log = logging.getLogger("kudusql.spark")


class KudusqlWriteError(RuntimeError):
    """Rows of a DataFrame write failed (duplicate keys in insert mode, NOT NULL, no range
    partition, ...). As in Kudu the other rows were applied and stay applied."""


def _options(options) -> tuple[str, str]:
    loc, table = options.get("flight"), options.get("table")
    if not loc or not table:
        raise ValueError('the kudusql data source needs .option("flight", "grpc://host:port") '
                         '(or .option("masters", "host:port,...") for a cluster) and '
                         '.option("table", name)')
    return loc, table


def _is_cluster(options) -> bool:
    return bool(options.get("masters"))


def _cluster_options(options):
    from kudusql.spark.cluster import cluster_options
    return cluster_options(options)


def cluster_catalog(options):
    from kudusql.spark.cluster import cluster_catalog as catalog
    return catalog(options)


class KudusqlDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kudusql"

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        if _is_cluster(self.options):
            arrow = cluster_catalog(self.options).get_table(
                _cluster_options(self.options)[2]).schema.arrow_schema()
        else:
            loc, table = _options(self.options)
            with fl.connect(loc) as c:
                arrow = c.get_schema(command(table=table)).schema
        from kudusql.spark.streaming import is_change_stream
        if is_change_stream(self.options):   # readStream: the change feed's columns too
            arrow = arrow.append(pa.field("_is_deleted", pa.bool_())).append(
                pa.field("_commit_ts", pa.int64()))
        return from_arrow_schema(arrow, prefer_timestamp_ntz=True)

    def streamWriter(self, schema: StructType, overwrite: bool):
        """writeStream: exactly-once micro-batches (kudusql/spark/streaming.py)."""
        from kudusql.spark.streaming import KudusqlStreamWriter
        if overwrite:
            raise ValueError("kudusql streams append: use outputMode(\"append\") (or "
                             "\"update\") with option(\"mode\", \"insert\" | \"upsert\")")
        return KudusqlStreamWriter(self.options, schema)

    def streamReader(self, schema: StructType):
        """readStream: the table's change feed (kudusql/spark/streaming.py)."""
        from kudusql.spark.streaming import KudusqlChangeReader
        return KudusqlChangeReader(self.options, schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        push = str(self.options.get("pushdown", "false")).lower() == "true"
        if _is_cluster(self.options):
            return (ClusterPushdownReader if push else ClusterReader)(self.options, schema)
        if push:
            return KudusqlPushdownReader(self.options, schema)
        return KudusqlReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> KudusqlWriter:
        if overwrite:
            raise ValueError('kudusql does not truncate tables: use mode("append") with '
                             'option("mode", "insert" | "upsert")')
        if _is_cluster(self.options):
            return ClusterWriter(self.options, schema)
        return KudusqlWriter(self.options, schema)


class KudusqlPythonDataSource(KudusqlDataSource):
    """The same source under the name the JVM connector (format "kudusql", kudusql/spark/java/) hands
    Flight and cluster reads and writes to when it is on the classpath."""

    @classmethod
    def name(cls) -> str:
        return "kudusql_python"


# -- reads -------------------------------------------------------------------------------
@dataclasses.dataclass
class TabletPartition(InputPartition):
    """One tablet of one planned scan: the Flight ticket and where to redeem it."""

    ticket: bytes
    locations: list[str]


def _not_finite(v) -> bool:
    """NaN and +-infinity: JSON holds neither, so such a literal is never pushed."""
    return isinstance(v, float) and not math.isfinite(v)


def float_columns(schema: StructType) -> frozenset[str]:
    """The FLOAT / DOUBLE columns of a Spark schema (see `_filter_to_predicate`)."""
    return frozenset(f.name for f in schema.fields
                     if isinstance(f.dataType, (DoubleType, FloatType)))


def _filter_to_predicate(f: Filter, floats: frozenset[str] = frozenset()) -> dict | None:
    """The engine predicate (JSON) equivalent to a Spark filter, or None (Spark keeps it).

    Exact or not pushed: the engine evaluates a pushed filter and Spark does not look at it
    again. On a FLOAT / DOUBLE column (`floats`) a lower bound (`>`, `>=`) is not pushed,
    and a zero in an IN is sent as both 0.0 and -0.0: rules from when the engine's scan
    predicates used IEEE order (NaN matched no range, a hashed IN told -0.0 from 0.0).
    The engine now orders floats as Spark does (engine/tablet/scan_spec.py), so both
    rules are conservative, not needed for exactness. A NaN or infinite literal is never
    pushed: JSON holds neither (tests/spark/test_float_filters.py)."""
    attr = getattr(f, "attribute", None)
    if not isinstance(attr, tuple) or len(attr) != 1:
        return None
    col = attr[0]
    v = getattr(f, "value", None)
    if (_not_finite(v) or (isinstance(f, In) and any(_not_finite(x) for x in f.value))
            or (col in floats and isinstance(f, (GreaterThan, GreaterThanOrEqual)))):
        return None

    def rng(lower=None, upper=None, li=True, ui=False) -> dict:
        return {"column": col, "kind": "range", "lower": value_to_json(lower),
                "upper": value_to_json(upper), "lower_inclusive": li, "upper_inclusive": ui}

    match f:
        case EqualTo(value=v) if v is not None:
            return rng(v, v, True, True)
        case EqualNullSafe(value=v):
            return {"column": col, "kind": "is_null"} if v is None else rng(v, v, True, True)
        case GreaterThan(value=v) if v is not None:
            return rng(lower=v, li=False)
        case GreaterThanOrEqual(value=v) if v is not None:
            return rng(lower=v, li=True)
        case LessThan(value=v) if v is not None:
            return rng(upper=v, ui=False)
        case LessThanOrEqual(value=v) if v is not None:
            return rng(upper=v, ui=True)
        case In(value=vs):
            vals = [value_to_json(v) for v in vs if v is not None]  # NULL never matches
            if col in floats and any(v == 0 for v in vals):
                vals += [0.0, -0.0]  # both zeros (see the docstring: now conservative)
            return {"column": col, "kind": "in", "values": vals} if vals else None
        case IsNull():
            return {"column": col, "kind": "is_null"}
        case IsNotNull():
            return {"column": col, "kind": "is_not_null"}
    return None


class KudusqlReader(DataSourceReader):
    """Projection = the schema Spark passes (PySpark 4.3 passes the full schema: no column
    pruning); no filter pushdown (the default; pushdown=true gives the subclass)."""

    def __init__(self, options, schema: StructType):
        self.location, self.table = _options(options)
        self.columns = list(schema.fieldNames())
        self.floats = float_columns(schema)
        self.predicates: list[dict] = []
        snap = options.get("snapshot")
        self.snapshot = int(snap) if snap not in (None, "") else None
        self.query_id: int | None = None

    def plan(self) -> tuple[int, list[TabletPartition]]:
        """(snapshot, partitions): one Flight get_flight_info (also used by partitions())."""
        kw = {"table": self.table, "columns": self.columns, "predicates": self.predicates}
        if self.snapshot is not None:
            kw["snapshot"] = self.snapshot
        with fl.connect(self.location) as c:
            info = c.get_flight_info(command(**kw))
        meta = json.loads(info.app_metadata or b"{}")
        self.query_id = meta.get("query_id")
        parts = [TabletPartition(ep.ticket.ticket,
                                 [loc.uri.decode() if isinstance(loc.uri, bytes) else loc.uri
                                  for loc in ep.locations] or [self.location])
                 for ep in info.endpoints]
        return meta.get("snapshot"), parts

    def partitions(self) -> list[InputPartition]:
        _, parts = self.plan()
        # Every tablet pruned: one empty partition (Spark expects at least one).
        return parts or [TabletPartition(b"", [self.location])]

    def read(self, partition: TabletPartition) -> Iterator[pa.RecordBatch]:
        if not partition.ticket:
            return
        loc = partition.locations[0] if partition.locations else self.location
        with fl.connect(loc) as c:
            for chunk in c.do_get(fl.Ticket(partition.ticket)):
                if chunk.data is not None and chunk.data.num_rows:
                    yield chunk.data


class KudusqlPushdownReader(KudusqlReader):
    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        cands = [(f, _filter_to_predicate(f, self.floats)) for f in filters]
        jsons = [p for _, p in cands if p is not None]
        ok = iter(action(self.location, "bind", {"table": self.table, "predicates": jsons})
                  if jsons else [])
        for f, p in cands:
            if p is not None and next(ok):
                self.predicates.append(p)
            else:
                yield f  # Spark evaluates it


# -- reads on a cluster: scan tokens (cluster.py) ------------------------------------------
@dataclasses.dataclass
class TokenPartition(InputPartition):
    """One tablet of a scan planned on a cluster: a serialised ScanToken and the hosts of
    the tablet's replicas (PySpark cannot pass them to the scheduler; kudusql/spark/
    cluster.py)."""

    token: bytes
    locations: list[str]


class ClusterReader(DataSourceReader):
    """Reads a cluster's tablet servers from the executors, one partition per tablet."""

    def __init__(self, options, schema: StructType):
        self.options = dict(options)
        self.masters, self.secret_file, self.table, _, _ = _cluster_options(options)
        self.columns = list(schema.fieldNames())
        self.floats = float_columns(schema)
        self.predicates: list = []
        snap = options.get("snapshot")
        self.snapshot = int(snap) if snap not in (None, "") else None

    def plan(self):
        """(snapshot, [ScanToken]) — the driver's plan (also used by partitions())."""
        from kudusql.spark.cluster import scan_tokens
        return scan_tokens(cluster_catalog(self.options), self.table, self.columns, self.predicates,
                           self.snapshot)

    def partitions(self) -> list[InputPartition]:
        _, tokens = self.plan()
        parts = [TokenPartition(t.serialize(), t.hosts()) for t in tokens]
        return parts or [TokenPartition(b"", [])]

    def read(self, partition: TokenPartition) -> Iterator[pa.RecordBatch]:
        if not partition.token:
            return
        from kudusql.spark.cluster import ScanToken
        for b in ScanToken.deserialize(partition.token).scan(cluster_catalog(self.options)):
            if b.num_rows:
                yield b


class ClusterPushdownReader(ClusterReader):
    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        from kudusql.spark.cluster import bindable
        from wire.flight import predicate_from_json
        schema = cluster_catalog(self.options).get_table(self.table).schema
        for f in filters:
            d = _filter_to_predicate(f, self.floats)
            p = predicate_from_json(d) if d is not None else None
            if p is not None and bindable(schema, [p])[0]:
                self.predicates.append(p)
            else:
                yield f  # Spark evaluates it


# -- writes ------------------------------------------------------------------------------
@dataclasses.dataclass
class KudusqlCommitMessage(WriterCommitMessage):
    rows: int
    applied: int
    failed: int
    failed_by_code: dict
    errors: list


class KudusqlWriter(DataSourceArrowWriter):
    def __init__(self, options, schema: StructType):
        self.location, self.table = _options(options)
        self.mode = str(options.get("mode", "insert")).lower()
        if self.mode not in ("insert", "upsert"):
            raise ValueError(f'option "mode" is insert or upsert, not {self.mode!r}')
        self.ignore_row_errors = str(options.get("ignore_row_errors", "false")).lower() == \
            "true"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KudusqlCommitMessage:
        it = iter(iterator)
        first = next((b for b in it if b.num_rows), None)
        if first is None:
            return KudusqlCommitMessage(0, 0, 0, {}, [])
        s = put(self.location, command(table=self.table, mode=self.mode), first, it)
        return KudusqlCommitMessage(s["rows"], s["applied"], s["failed"],
                                    s["failed_by_code"], s["errors"][:20])

    def commit(self, messages: list[KudusqlCommitMessage | None]) -> None:
        msgs = [m for m in messages if m is not None]
        rows = sum(m.rows for m in msgs)
        applied = sum(m.applied for m in msgs)
        failed = sum(m.failed for m in msgs)
        codes: dict[str, int] = {}
        for m in msgs:
            for k, v in m.failed_by_code.items():
                codes[k] = codes.get(k, 0) + v
        summary = (f"kudusql {self.mode} into {self.table}: {rows} rows, {applied} applied, "
                   f"{failed} failed")
        if not failed:
            log.info("%s", summary)
            return
        examples = "; ".join(f"{e['code']} key {e['key']}: {e['message']}"
                             for m in msgs for e in m.errors[:3])[:2000]
        text = (f"{summary} ({', '.join(f'{k}: {v}' for k, v in sorted(codes.items()))}); "
                f"the other rows were applied and stay applied; e.g. {examples}")
        if self.ignore_row_errors:
            log.warning("%s", text)
            return
        raise KudusqlWriteError(text)

    def abort(self, messages) -> None:
        log.warning("kudusql write into %s aborted: rows already written stay applied "
                    "(Kudu has no multi-row transactions)", self.table)


class ClusterWriter(KudusqlWriter):
    """Each task writes its rows straight to the tablet servers through the client library
    (routing per tablet, leader retries, exactly-once request ids: engine/client)."""

    def __init__(self, options, schema: StructType):
        self.options = dict(options)
        _, _, self.table, _, _ = _cluster_options(options)
        self.mode = str(options.get("mode", "insert")).lower()
        if self.mode not in ("insert", "upsert"):
            raise ValueError(f'option "mode" is insert or upsert, not {self.mode!r}')
        self.ignore_row_errors = str(options.get("ignore_row_errors", "false")).lower() == \
            "true"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KudusqlCommitMessage:
        from wire.flight import conform
        t = cluster_catalog(self.options).table(self.table)
        target = t.schema.arrow_schema()
        rows = applied = 0
        codes: dict[str, int] = {}
        errs: list[dict] = []
        pending: list[pa.RecordBatch] = []

        def flush():
            nonlocal rows, applied, pending
            if not pending:
                return
            tbl = conform(pa.Table.from_batches(pending), target)
            pending = []
            r = t.insert(tbl) if self.mode == "insert" else t.upsert(tbl)
            for e in r.row_errors:
                codes[e.code] = codes.get(e.code, 0) + 1
                if len(errs) < 20:
                    errs.append({"code": e.code, "message": e.message,
                                 "key": [value_to_json(v) for v in (e.key or ())]})
            rows += tbl.num_rows
            applied += r.num_applied

        n = 0
        for b in iterator:
            if b.num_rows:
                pending.append(b)
                n += b.num_rows
                if n >= 65_536:
                    flush()
                    n = 0
        flush()
        return KudusqlCommitMessage(rows, applied, sum(codes.values()), codes, errs)
