"""Utility statements: DDL and SHOW / DESCRIBE, executed directly against the engine catalog.

    sql ──planner.ddl.parse──> AST ──is_utility?──> execute_utility(catalog, ast, sql)
                                                      └─> StatementResult(command, table,
                                                                          notices)

Nothing here is planned or optimised: each statement is one or a few `Catalog` calls
(`engine/catalog/catalog.py`), or a small Arrow table built from catalog metadata.

Statements (the KuduSQL dialect, `planner/dialect.py`: Impala's syntax for Kudu tables plus
PostgreSQL spellings):

    CREATE TABLE [IF NOT EXISTS] ...       planner.ddl.create_table_spec -> create_table
    DROP TABLE [IF EXISTS] t [, ...]       every name is checked before any table is dropped
    CREATE INDEX ... ON t (c, ...)         accepted, nothing created (Kudu has no secondary
                                           indexes): a NOTICE; CREATE UNIQUE INDEX is 0A000
    DROP INDEX [IF EXISTS] i               accepted with a NOTICE (no index exists)
    ALTER TABLE [IF EXISTS] t action [, action ...]
      RENAME TO t2                         rename_table
      RENAME COLUMN a TO b                 rename_column (key and partition columns too)
      CHANGE [COLUMN] a b type             Impala's rename; the type must stay the same
      ADD [COLUMN] [IF NOT EXISTS] c type [NULL | NOT NULL] [DEFAULT x] [ENCODING e] ...
      ADD [IF NOT EXISTS] COLUMNS (c type ..., ...)                     add_column, each
      DROP [COLUMN] [IF EXISTS] c          drop_column (never a primary key column)
      ADD [IF NOT EXISTS] [RANGE] PARTITION bound                       add_range_partition
      DROP [IF EXISTS] [RANGE] PARTITION bound                          drop_range_partition
      SET TBLPROPERTIES ('k'='v', ...) | SET (k = v, ...) | UNSET TBLPROPERTIES ('k', ...)
    COMMENT ON TABLE t IS 'text'           set_properties(comment=...); '' removes it
    SHOW TABLES [[LIKE] 'pattern']         Impala patterns: `*` any text, `|` alternatives
    SHOW VIEWS [[LIKE] 'pattern']          the views (planner/views.py), as SHOW TABLES
    SHOW CREATE VIEW v                     CREATE VIEW v (columns) AS <query as written>
    DESCRIBE t | DESC t | SHOW COLUMNS {FROM | IN} t
    SHOW [RANGE] PARTITIONS t | SHOW TABLETS t | SHOW CREATE TABLE t

A range `bound` is CREATE TABLE's (`VALUES < x`, `x <= VALUES < y`, `VALUE = v`, tuples for
a multi-column range key), coerced to the range columns' types the same way
(`planner.ddl.range_spec`).

Result tables (explicit Arrow types, also when empty; one row per item, in this order):

    SHOW TABLES           name string                                       (sorted)
    DESCRIBE / COLUMNS    (of a view: name and type; the other columns NULL)
                          name, type string (BIGINT, DECIMAL(15,2), STRING ...),
                          primary_key bool, nullable bool, default string (a SQL literal,
                          NULL when none), encoding, compression string, block_size int32
                                                                         (schema order)
    SHOW PARTITIONS       range_partition string (Impala's SHOW RANGE PARTITIONS text:
                          `VALUES < 10`, `10 <= VALUES < 20`, `VALUE = "al"`, `UNBOUNDED`),
                          tablets int32 (one per hash bucket combination)  (range order)
    SHOW TABLETS          tablet_id, partition string (`HASH(host): 2, RANGE: 10 <= VALUES
                          < 20`), replication_factor int32, num_rowsets int64,
                          memrowset_rows int64, on_disk_bytes int64        (partition order)
      on a cluster        one row per replica: tablet_id, partition, replication_factor
                          int32, server_uuid, rpc_addr, role (LEADER / FOLLOWER / LEARNER),
                          state (RUNNING, BOOTSTRAPPING, COPYING, FAILED, ...), term int64
                          (partition order, each tablet's leader first; from the leader
                          master: planner/system_tables.py, engine/tserver/status.py)
    SHOW CREATE TABLE     statement string: parses back (create_table_spec) to the same
                          schema and partition schema

SHOW TABLETS stays cheap: it never opens a tablet (opening replays its WAL into the
MemRowSet). A tablet that is already open reports its live rowset and MemRowSet counts; a
closed one reports the rowsets of its flushed metadata and a NULL MemRowSet count. The size
is the tablet directory's (data, metadata and WAL).

ALTER TABLE with several actions: every action is parsed and checked first (types, defaults,
range bounds, names against the table as it is), then they are applied one at a time, each
its own catalog DDL — so a failure part way leaves the earlier actions applied (Kudu's
AlterTable is atomic; the catalog has no multi-step alter).

Engine behaviour that shows through (engine/catalog/catalog.py): ADD COLUMN and DROP COLUMN
alter every tablet in place, rows and all (existing rows read an added column's DEFAULT or
NULL, also at earlier snapshots; a dropped column's data goes with later compactions; they
wait for the table's running scans and writes, 53200 if those outlast the catalog's busy
timeout); the catalog keeps no column comments
(COMMENT on a column is accepted in CREATE TABLE with a notice, refused on its own);
ALTER COLUMN (SET DEFAULT, ENCODING, ...) is not supported; the replication factor cannot
change after CREATE TABLE.

Errors are `planner.errors.SqlError`s with PostgreSQL SQLSTATEs: 42P01 unknown table,
42P07 table exists, 42703 unknown column, 42701 column exists, 42P16 dropping a primary key
column, 23502 a NOT NULL column added without a default, 42710 range
partition exists, 42704 no such range partition or table property, 42809 range DDL on a
table without RANGE columns, 0A000 what the engine cannot do; engine errors keep their
SQLSTATE. `position` is 1-based in `sql`, the text `ast` was parsed from: the caller parses
each statement's own text, so the parser's offsets are offsets into `sql`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow as pa
from sqlglot import exp

from engine import errors as engine_errors
from engine.catalog import Catalog
from engine.catalog.catalog import TableMetadata
from engine.catalog.partition import PartitionSchema, RangeSpec
from engine.client.cluster_info import list_replicas, remote_catalog
from engine.tablet.tablet import META_FILE
from planner.ddl import (
    COLUMN_ORDER_PROPERTY,
    REPLICAS_PROPERTY,
    fold_ident,
    node_pos,
    column_from_def,
    column_order_properties,
    create_table_spec,
    create_table_sql,
    declared_columns,
    range_spec,
    sql_literal,
    sql_type,
)
from planner.dialect import (
    KuduAddRangePartition,
    KuduChangeColumn,
    KuduDropRangePartition,
    KuduRangeBound,
    KuduShow,
    KuduSQL,
    KuduUnsetProperties,
)
from planner.errors import (
    FeatureNotSupported,
    InvalidTableDefinition,
    SqlError,
    SqlSyntaxError,
)
from planner.binder.views import catalog_views
from planner.expr import sql_type as sql_type_of
from planner.result import StatementResult
from planner.views import cascade_notices, check_column_change, show_create_view, \
    views_following_rename

_REPLICA_KEYS = (REPLICAS_PROPERTY, "replication_factor")

DESCRIBE_SCHEMA = pa.schema([
    ("name", pa.string()), ("type", pa.string()), ("primary_key", pa.bool_()),
    ("nullable", pa.bool_()), ("default", pa.string()), ("encoding", pa.string()),
    ("compression", pa.string()), ("block_size", pa.int32()),
])
TABLES_SCHEMA = pa.schema([("name", pa.string())])
PARTITIONS_SCHEMA = pa.schema([("range_partition", pa.string()), ("tablets", pa.int32())])
TABLETS_SCHEMA = pa.schema([
    ("tablet_id", pa.string()), ("partition", pa.string()),
    ("replication_factor", pa.int32()), ("num_rowsets", pa.int64()),
    ("memrowset_rows", pa.int64()), ("on_disk_bytes", pa.int64()),
])
# SHOW TABLETS on a cluster: one row per replica (planner/system_tables.py has the states)
CLUSTER_TABLETS_SCHEMA = pa.schema([
    ("tablet_id", pa.string()), ("partition", pa.string()),
    ("replication_factor", pa.int32()), ("server_uuid", pa.string()),
    ("rpc_addr", pa.string()), ("role", pa.string()), ("state", pa.string()),
    ("term", pa.int64()),
])
CREATE_SCHEMA = pa.schema([("statement", pa.string())])


# -- entry points ---------------------------------------------------------------------------

def is_utility(ast: exp.Expr) -> bool:
    """True for the statements `execute_utility` runs (CREATE TABLE without AS SELECT)."""
    kind = (ast.args.get("kind") or "") if isinstance(ast, exp.Expr) else ""
    kind = kind.upper() if isinstance(kind, str) else ""
    match ast:
        case exp.Create():
            return (kind == "TABLE" and ast.args.get("expression") is None) or \
                kind == "INDEX"
        case exp.Drop():
            return kind in ("TABLE", "INDEX")
        case exp.Alter():
            return kind == "TABLE"
        case exp.Comment():
            return kind in ("TABLE", "COLUMN")
        case exp.Describe():
            return isinstance(ast.this, exp.Table)
        case KuduShow():
            return True
    return False


def execute_utility(catalog: Catalog, ast: exp.Expr, sql: str) -> StatementResult:
    """Run one utility statement (see the module docstring) against `catalog`."""
    if not is_utility(ast):
        raise FeatureNotSupported(f"not a utility statement: {ast.sql(dialect=KuduSQL)[:60]}")
    return _UtilityRunner(catalog, sql).run(ast)


# -- helpers --------------------------------------------------------------------------------

def _table_name(node: exp.Expr) -> str:
    """A table reference -> its catalog name (case folded like CREATE TABLE's)."""
    if isinstance(node, exp.Table):
        return ".".join(fold_ident(p) for p in node.parts)
    return fold_ident(node)


def _like(pattern: str) -> re.Pattern:
    """Impala's SHOW TABLES pattern: `*` matches any text, `|` separates alternatives."""
    alts = [".*".join(re.escape(part) for part in alt.strip().split("*"))
            for alt in pattern.split("|")]
    return re.compile("|".join(f"(?:{a})" for a in alts), re.IGNORECASE)


def _property_text(node: exp.Expr) -> str:
    if isinstance(node, (exp.Literal, exp.Var, exp.Identifier, exp.Column)):
        return node.name
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    return node.sql(dialect=KuduSQL)


def partition_text(ps: PartitionSchema, partition) -> str:
    """`HASH(a): 1, HASH(b): 0, RANGE: 10 <= VALUES < 20` (no levels: UNPARTITIONED)."""
    parts = [f"HASH({', '.join(h.columns)}): {b}"
             for h, b in zip(ps.hash_schemas, partition.hash_buckets)]
    if ps.range_schema.columns:
        parts.append(f"RANGE: {partition.range}")
    return ", ".join(parts) or "UNPARTITIONED"


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except OSError:
                pass  # removed meanwhile (a flush or compaction replaced it)
    return total


def _tablet_counts(catalog: Catalog, tablet_id: str) -> tuple[int | None, int | None]:
    """(rowsets, MemRowSet rows) of a tablet without opening it (see module docstring)."""
    open_tablet = getattr(catalog, "open_tablet", None)   # the embedded Catalog's
    tablet = open_tablet(tablet_id) if open_tablet is not None else None
    if tablet is not None:
        return tablet.num_rowsets(), tablet.mrs_rows()
    try:
        with open(os.path.join(catalog.tablet_path(tablet_id), META_FILE)) as f:
            return len(json.load(f).get("rowsets", ())), None
    except (OSError, ValueError):
        return None, None


# -- the runner -----------------------------------------------------------------------------

@dataclasses.dataclass
class _UtilityRunner:
    """Runs one utility statement against the catalog (`run` matches on the statement's
    node); not a plan executor (that is planner/executor's `Executor`)."""
    catalog: Catalog
    sql: str
    notices: list[str] = dataclasses.field(default_factory=list)
    table: str = ""  # ALTER TABLE: the table's current name (RENAME TO changes it)

    def run(self, ast: exp.Expr) -> StatementResult:
        match ast:
            case exp.Create() if (ast.args.get("kind") or "").upper() == "INDEX":
                return self.create_index(ast)
            case exp.Create():
                return self.create_table(ast)
            case exp.Drop() if (ast.args.get("kind") or "").upper() == "INDEX":
                return self.drop_index(ast)
            case exp.Drop():
                return self.drop_table(ast)
            case exp.Alter():
                return self.alter_table(ast)
            case exp.Comment():
                return self.comment(ast)
            case exp.Describe():
                return self.rows("DESCRIBE", self.describe(ast.this))
            case KuduShow():
                return self.show(ast)
        raise FeatureNotSupported(f"not a utility statement: {ast.key}")

    # -- plumbing -----------------------------------------------------------------------------

    def pos(self, node: exp.Expr | None) -> int | None:
        p = node_pos(node)
        return p if p is not None and p <= len(self.sql) + 1 else None

    @contextmanager
    def engine(self, node: exp.Expr | None) -> Iterator[None]:
        """Engine errors -> SqlError with their SQLSTATE and the position of `node`."""
        try:
            yield
        except engine_errors.EngineError as e:
            raise SqlError.from_engine(e, self.pos(node)) from None

    def result(self, command: str) -> StatementResult:
        return StatementResult(command, notices=list(self.notices))

    def rows(self, command: str, table: pa.Table) -> StatementResult:
        return StatementResult.rows(command, table, notices=list(self.notices))

    def meta(self, node: exp.Expr) -> TableMetadata:
        with self.engine(node):
            return self.catalog.get_table(_table_name(node))

    # -- CREATE / DROP / COMMENT ----------------------------------------------------------------

    def create_table(self, ast: exp.Create) -> StatementResult:
        spec = create_table_spec(ast)
        name_node = ast.this.this if isinstance(ast.this, exp.Schema) else ast.this
        if spec.column_comments:
            self.notices.append(
                "column comments are not stored (the catalog keeps none): "
                + ", ".join(sorted(spec.column_comments)))
        if spec.if_not_exists and self.catalog.has_table(spec.name):
            self.notices.append(f'relation "{spec.name}" already exists, skipping')
            return self.result("CREATE TABLE")
        declared = [fold_ident(c.this) for c in ast.this.expressions if isinstance(c, exp.ColumnDef)] \
            if isinstance(ast.this, exp.Schema) else list(spec.schema.names)
        try:
            self.catalog.create_table(
                spec.name, spec.schema, spec.partition_schema,
                replication_factor=spec.replication_factor, comment=spec.comment,
                properties=column_order_properties(declared, spec.schema, spec.properties),
                if_not_exists=spec.if_not_exists)
        except engine_errors.AlreadyPresent as e:
            raise SqlError.from_engine(e, self.pos(name_node)) from None
        except engine_errors.EngineError as e:
            raise SqlError.from_engine(e) from None
        return self.result("CREATE TABLE")

    def drop_table(self, ast: exp.Drop) -> StatementResult:
        nodes = ast.args.get("tables") or [ast.this]
        if_exists = bool(ast.args.get("exists"))
        found = []
        cascade = bool(ast.args.get("cascade"))
        views = catalog_views(self.catalog)
        for node in nodes:  # as PostgreSQL: check every name before dropping any
            name = _table_name(node)
            if name in views:
                raise SqlError(f'"{name}" is not a table', "42809", self.pos(node),
                               hint="Use DROP VIEW to remove a view.")
            if self.catalog.has_table(name):
                found.append((name, node))
            elif if_exists:
                self.notices.append(f'table "{name}" does not exist, skipping')
            else:
                raise SqlError(f'table "{name}" does not exist', "42P01", self.pos(node))
        for name, node in found:
            with self.engine(node):
                along = self.catalog.drop_table(name, if_exists=True, cascade=cascade)
            self.notices += cascade_notices(along or [])
        return self.result("DROP TABLE")

    def create_index(self, ast: exp.Create) -> StatementResult:
        """Kudu has no secondary indexes. A plain index only speeds reads up, so CREATE INDEX
        is accepted (after checking its table and columns) and creates nothing, with a
        NOTICE: schema scripts and migrations written for PostgreSQL run unchanged. A UNIQUE
        index would be a constraint the engine cannot enforce: refused."""
        idx = ast.this
        table = idx.args.get("table")
        if ast.args.get("unique"):
            raise FeatureNotSupported(
                "CREATE UNIQUE INDEX is not supported: Kudu enforces uniqueness only for the "
                "primary key", position=self.pos(ast))
        if table is None:
            raise SqlSyntaxError("CREATE INDEX needs ON table", position=self.pos(ast))
        meta = self.meta(table)
        params = idx.args.get("params")
        known = set(meta.schema.names)
        for o in (params.args.get("columns") or []) if params is not None else []:
            col = o.this if isinstance(o, exp.Ordered) else o
            for c in col.find_all(exp.Column):
                if c.name not in known:
                    raise SqlError(f'column "{c.name}" does not exist', "42703", self.pos(c))
        name = f'index "{idx.name}"' if idx.name else "the index"
        self.notices.append(
            f"{name} was not created: kudusql (like Kudu) has no secondary indexes; "
            "reads use the primary key, partition pruning and per-page min/max instead")
        return self.result("CREATE INDEX")

    def drop_index(self, ast: exp.Drop) -> StatementResult:
        """CREATE INDEX creates nothing, so DROP INDEX has nothing to drop: accepted with
        PostgreSQL's IF EXISTS notice whether or not IF EXISTS was written (a migration
        that created an index drops it again without failing)."""
        for node in ast.args.get("tables") or [ast.this]:
            self.notices.append(f'index "{_table_name(node)}" does not exist, skipping')
        return self.result("DROP INDEX")

    def comment(self, ast: exp.Comment) -> StatementResult:
        if ast.args["kind"].upper() != "TABLE":
            raise FeatureNotSupported("column comments are not supported (the catalog keeps "
                                      "none)", position=self.pos(ast.this))
        self.meta(ast.this)
        text = ast.expression
        value = text.name if isinstance(text, exp.Literal) else None
        value = value or None  # PostgreSQL: an empty comment removes it
        with self.engine(ast.this):
            self.catalog.set_properties(_table_name(ast.this), comment=value)
        return self.result("COMMENT")

    # -- ALTER TABLE ------------------------------------------------------------------------------

    def alter_table(self, ast: exp.Alter) -> StatementResult:
        node = ast.this
        name = _table_name(node)
        if not self.catalog.has_table(name):
            if ast.args.get("exists"):
                self.notices.append(f'relation "{name}" does not exist, skipping')
                return self.result("ALTER TABLE")
            raise SqlError(f'table "{name}" does not exist', "42P01", self.pos(node))
        for opt in ast.args.get("options") or []:
            raise FeatureNotSupported(
                f"ALTER TABLE option not supported: {opt.sql(dialect=KuduSQL)}",
                position=self.pos(opt))
        self.table = name
        meta = self.meta(node)
        actions: list[exp.Expr] = []
        for a in ast.args.get("actions") or []:
            actions.extend(a.expressions if isinstance(a, exp.Schema) else [a])
        steps = [self.plan_action(a, meta) for a in actions]
        for step in steps:
            step()
        return self.result("ALTER TABLE")

    def current(self) -> TableMetadata:
        return self.catalog.get_table(self.table)

    def plan_action(self, a: exp.Expr, meta: TableMetadata) -> Callable[[], None]:
        """Check one ALTER TABLE action; return the function that applies it."""
        match a:
            case exp.AlterRename():
                return self.plan_rename_table(a)
            case exp.RenameColumn():
                return self.plan_rename_column(a, a.this, a.args["to"], meta,
                                               bool(a.args.get("exists")))
            case KuduChangeColumn():
                return self.plan_change_column(a, meta)
            case exp.ColumnDef():
                return self.plan_add_column(a)
            case exp.Drop() if (a.args.get("kind") or "").upper() == "COLUMN":
                return self.plan_drop_columns(a, meta)
            case KuduAddRangePartition() | KuduDropRangePartition():
                return self.plan_range(a, meta)
            case exp.AlterSet():
                return self.plan_set_properties(a)
            case KuduUnsetProperties():
                return self.plan_unset_properties(a, meta)
            case exp.AlterColumn():
                raise FeatureNotSupported(
                    "ALTER COLUMN is not supported: a column's type, default, encoding, "
                    "compression and block size cannot change after it is created",
                    position=self.pos(a))
        raise FeatureNotSupported(
            f"ALTER TABLE action not supported: {a.sql(dialect=KuduSQL)}", position=self.pos(a))

    def plan_rename_table(self, a: exp.AlterRename) -> Callable[[], None]:
        new = _table_name(a.this)

        def step() -> None:
            # the views that read the table follow it (planner/views.py)
            views = views_following_rename(self.catalog, self.table, new)
            with self.engine(a.this):
                self.catalog.rename_table(self.table, new, views=views)
            self.table = new
        return step

    def plan_rename_column(self, a: exp.Expr, old_node: exp.Expr, new_node: exp.Expr,
                           meta: TableMetadata, if_exists: bool = False) -> Callable[[], None]:
        old, new = fold_ident(old_node), fold_ident(new_node)

        def step() -> None:
            if not self.current().schema.has_column(old):
                if if_exists:
                    self.notices.append(f'column "{old}" of relation "{self.table}" does '
                                        f'not exist, skipping')
                    return
                raise SqlError(f'column "{old}" of relation "{self.table}" does not exist',
                               "42703", self.pos(old_node))
            if old == new:
                return
            check_column_change(self.catalog, self.table, old, "rename", self.pos(old_node))
            with self.engine(new_node):
                self.catalog.rename_column(self.table, old, new)
        return step

    def plan_change_column(self, a: KuduChangeColumn, meta: TableMetadata
                           ) -> Callable[[], None]:
        cdef = a.expression
        old = fold_ident(a.this)
        new, _is_key, _comment = column_from_def(cdef)
        if not meta.schema.has_column(old):
            raise SqlError(f'column "{old}" of relation "{self.table}" does not exist',
                           "42703", self.pos(a.this))
        cur = meta.schema.column(old)
        if sql_type(new) != sql_type(cur):
            raise FeatureNotSupported(
                f'cannot change the type of column "{old}" ({sql_type(cur)} to '
                f"{sql_type(new)}): CHANGE only renames a column", position=self.pos(cdef))
        extra = [c for c in cdef.constraints if not isinstance(c.kind, exp.CommentColumnConstraint)]
        if extra:
            raise FeatureNotSupported(
                "CHANGE only renames a column; its attributes cannot change: "
                + extra[0].sql(dialect=KuduSQL), position=self.pos(extra[0]) or self.pos(cdef))
        return self.plan_rename_column(a, a.this, cdef.this, meta)

    def plan_add_column(self, cdef: exp.ColumnDef) -> Callable[[], None]:
        col, is_key, comment = column_from_def(cdef)
        if_not_exists = bool(cdef.args.get("exists"))
        if is_key:
            raise FeatureNotSupported(
                f'cannot add primary key column "{col.name}": a Kudu table\'s primary key '
                f"is fixed when it is created", position=self.pos(cdef))

        def step() -> None:
            if self.current().schema.has_column(col.name):
                if if_not_exists:
                    self.notices.append(f'column "{col.name}" of relation "{self.table}" '
                                        f"already exists, skipping")
                    return
                raise SqlError(f'column "{col.name}" of relation "{self.table}" already '
                               f"exists", "42701", self.pos(cdef))
            if not col.nullable and col.default is None:
                # existing rows would hold NULL (Kudu: "A new non-null column must have a
                # default value"); PostgreSQL's wording and SQLSTATE
                raise SqlError(f'column "{col.name}" of relation "{self.table}" contains '
                               f"null values", "23502", self.pos(cdef))
            if comment is not None:
                self.notices.append(f'the comment of column "{col.name}" is not stored')
            with self.engine(cdef):
                self.catalog.add_column(self.table, col)
        return step

    def plan_drop_columns(self, a: exp.Drop, meta: TableMetadata) -> Callable[[], None]:
        if_exists = bool(a.args.get("exists"))
        nodes = a.args.get("tables") or [a.this]
        names = [fold_ident(n) for n in nodes]
        for name, node in zip(names, nodes):
            if meta.schema.has_column(name) and meta.schema.is_key(name):
                raise InvalidTableDefinition(f'cannot drop primary key column "{name}"',
                                             position=self.pos(node))

        def step() -> None:
            for name, node in zip(names, nodes):
                schema = self.current().schema
                if not schema.has_column(name):
                    if if_exists:
                        self.notices.append(f'column "{name}" of relation "{self.table}" '
                                            f"does not exist, skipping")
                        continue
                    raise SqlError(f'column "{name}" of relation "{self.table}" does not '
                                   f"exist", "42703", self.pos(node))
                if schema.is_key(name):  # renamed into a key column by an earlier action
                    raise InvalidTableDefinition(f'cannot drop primary key column "{name}"',
                                                 position=self.pos(node))
                check_column_change(self.catalog, self.table, name, "drop", self.pos(node))
                with self.engine(node):
                    self.catalog.drop_column(self.table, name)
        return step

    def plan_range(self, a: KuduAddRangePartition | KuduDropRangePartition,
                   meta: TableMetadata) -> Callable[[], None]:
        bound: KuduRangeBound = a.this
        ps = meta.partition_schema
        if not ps.range_schema.columns:
            raise SqlError(f'table "{self.table}" has no range partitioning (no RANGE '
                           f"columns)", "42809", self.pos(bound))
        cols = [meta.schema.column(c) for c in ps.range_schema.columns]
        spec: RangeSpec = range_spec(bound, cols)
        with self.engine(bound):
            rp = ps.canonical_range(spec)  # bounds in order, values in range: fail early
        adding = isinstance(a, KuduAddRangePartition)
        flag = bool(a.args.get("exists"))

        def step() -> None:
            exists = rp in self.current().partition_schema.range_partitions
            if adding and exists and flag:
                self.notices.append(f"range partition {rp} already exists, skipping")
            elif not adding and not exists:
                if not flag:
                    raise SqlError(f"no range partition to drop: {rp}", "42704",
                                   self.pos(bound))
                self.notices.append(f"range partition {rp} does not exist, skipping")
            else:
                with self.engine(bound):
                    if adding:
                        self.catalog.add_range_partition(self.table, spec, if_not_exists=flag)
                    else:
                        self.catalog.drop_range_partition(self.table, spec, if_exists=flag)
        return step

    def _check_property_key(self, key: str, node: exp.Expr) -> None:
        if key.lower() in _REPLICA_KEYS:
            raise FeatureNotSupported(
                f"the replication factor of an existing table cannot change ({key})",
                position=self.pos(node))

    def plan_set_properties(self, a: exp.AlterSet) -> Callable[[], None]:
        items: list[tuple[exp.Expr, exp.Expr]] = []
        for e in a.expressions:
            if isinstance(e, exp.Properties):
                items.extend((p.this, p.args["value"]) for p in e.expressions
                             if type(p) is exp.Property)
                if any(type(p) is not exp.Property for p in e.expressions):
                    raise FeatureNotSupported(
                        f"table property not supported: {e.sql(dialect=KuduSQL)}",
                        position=self.pos(e))
            elif isinstance(e, exp.EQ):
                items.append((e.this, e.expression))
            else:
                raise FeatureNotSupported(
                    f"ALTER TABLE SET not supported: {a.sql(dialect=KuduSQL)}",
                    position=self.pos(a))
        if not items:
            raise FeatureNotSupported(f"ALTER TABLE SET not supported: "
                                      f"{a.sql(dialect=KuduSQL)}", position=self.pos(a))
        props: dict[str, str] = {}
        comment: object = ...
        for k, v in items:
            key = k.name
            self._check_property_key(key, k)
            if key.lower() == "comment":  # Hive/Impala: the table comment
                comment = None if isinstance(v, exp.Null) else _property_text(v)
            else:
                props[key] = _property_text(v)

        def step() -> None:
            with self.engine(a):
                self.catalog.set_properties(self.table, props, comment=comment)
        return step

    def plan_unset_properties(self, a: KuduUnsetProperties, meta: TableMetadata
                              ) -> Callable[[], None]:
        keys = [(k.name, k) for k in a.expressions]
        for key, node in keys:
            self._check_property_key(key, node)

        def step() -> None:
            current = self.current()
            unset, comment = [], ...
            for key, node in keys:
                if key.lower() == "comment":
                    comment = None
                elif key in current.properties:
                    unset.append(key)
                elif not a.args.get("exists"):
                    raise SqlError(f'table property "{key}" does not exist', "42704",
                                   self.pos(node))
            with self.engine(a):
                self.catalog.set_properties(self.table, comment=comment, unset=unset)
        return step

    # -- SHOW / DESCRIBE --------------------------------------------------------------------------

    def show(self, ast: KuduShow) -> StatementResult:
        kind = ast.args["kind"]
        if kind in ("TABLES", "VIEWS"):
            names = self.catalog.list_tables() if kind == "TABLES" else \
                sorted(catalog_views(self.catalog))
            if ast.args.get("like") is not None:
                pattern = _like(ast.args["like"].name)
                names = [n for n in names if pattern.fullmatch(n)]
            return self.rows("SHOW", pa.table([pa.array(names, pa.string())],
                                              schema=TABLES_SCHEMA))
        table = ast.this
        match kind:
            case "COLUMNS":
                out = self.describe(table)
            case "PARTITIONS":
                out = self.partitions(self.meta(table))
            case "TABLETS":
                out = self.tablets(self.meta(table))
            case "CREATE VIEW":
                out = show_create_view(self.catalog, _table_name(table), self.pos(table))
            case "CREATE TABLE":
                m = self.meta(table)
                props = {k: v for k, v in (m.properties or {}).items()
                         if k != COLUMN_ORDER_PROPERTY}
                text = create_table_sql(m.name, m.schema, m.partition_schema,
                                        replication_factor=m.replication_factor,
                                        comment=m.comment, properties=props)
                out = pa.table([pa.array([text], pa.string())], schema=CREATE_SCHEMA)
            case _:
                raise FeatureNotSupported(f"SHOW {kind} is not supported",
                                          position=self.pos(ast))
        return self.rows("SHOW", out)

    def describe(self, table: exp.Expr) -> pa.Table:
        view = catalog_views(self.catalog).get(_table_name(table))
        if view is not None:        # a view: its columns and types, nothing else applies
            n = len(view.schema)
            data = [view.columns, [sql_type_of(f.type) for f in view.schema], [False] * n,
                    [True] * n] + [[None] * n] * 4
            return pa.table([pa.array(d, f.type) for d, f in zip(data, DESCRIBE_SCHEMA)],
                            schema=DESCRIBE_SCHEMA)
        schema = self.meta(table).schema
        cols = [schema.column(c) for c in declared_columns(self.catalog.table(_table_name(table)))]
        key = set(schema.key_names)
        data = [
            [c.name for c in cols],
            [sql_type(c) for c in cols],
            [c.name in key for c in cols],
            [c.nullable for c in cols],
            [None if c.default is None else sql_literal(c.default) for c in cols],
            [c.encoding for c in cols],
            [c.compression for c in cols],
            [c.block_size for c in cols],
        ]
        return pa.table([pa.array(d, f.type) for d, f in zip(data, DESCRIBE_SCHEMA)],
                        schema=DESCRIBE_SCHEMA)

    def partitions(self, meta: TableMetadata) -> pa.Table:
        ps = meta.partition_schema
        per_range = 1
        for n in ps.num_buckets:
            per_range *= n
        ranges = [str(r) for r in ps.range_partitions]
        return pa.table([pa.array(ranges, pa.string()),
                         pa.array([per_range] * len(ranges), pa.int32())],
                        schema=PARTITIONS_SCHEMA)

    def tablets(self, meta: TableMetadata) -> pa.Table:
        rc = remote_catalog(self.catalog)
        if rc is not None:
            return self.cluster_tablets(rc, meta)
        ps = meta.partition_schema
        rows: list[list] = [[] for _ in TABLETS_SCHEMA]
        for partition, tid in meta.tablets():
            rowsets, mrs_rows = _tablet_counts(self.catalog, tid)
            for col, v in zip(rows, (tid, partition_text(ps, partition),
                                     meta.replication_factor, rowsets, mrs_rows,
                                     _dir_bytes(self.catalog.tablet_path(tid)))):
                col.append(v)
        return pa.table([pa.array(d, f.type) for d, f in zip(rows, TABLETS_SCHEMA)],
                        schema=TABLETS_SCHEMA)

    def cluster_tablets(self, rc, meta: TableMetadata) -> pa.Table:
        """One row per replica, tablets in partition order, each tablet's leader first."""
        ps = meta.partition_schema
        by_tablet: dict[str, list[dict]] = {}
        for r in list_replicas(rc):
            if r["table_id"] == meta.id:
                by_tablet.setdefault(r["tablet_id"], []).append(r)
        order = {"LEADER": 0, "FOLLOWER": 1, "LEARNER": 2}
        rows: list[list] = [[] for _ in CLUSTER_TABLETS_SCHEMA]
        for partition, tid in meta.tablets():
            text = partition_text(ps, partition)
            reps = sorted(by_tablet.get(tid, []),
                          key=lambda r: (order.get(r["role"], 3), r["addr"]))
            for r in reps:
                for col, v in zip(rows, (tid, text, meta.replication_factor, r["uuid"],
                                         r["addr"], r["role"], r["state"], r["term"])):
                    col.append(v)
        return pa.table([pa.array(d, f.type) for d, f in zip(rows, CLUSTER_TABLETS_SCHEMA)],
                        schema=CLUSTER_TABLETS_SCHEMA)
