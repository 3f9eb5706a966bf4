"""CREATE TABLE: a KuduSQL statement -> a `CreateTableSpec` the engine catalog accepts.

    sql ──KuduSQL──> exp.Create ──create_table_spec──> CreateTableSpec
                                                      ├── schema: engine Schema (key first)
                                                      ├── partition_schema_args / partition_schema
                                                      └── replication_factor, comment, properties
    catalog.create_table(spec.name, spec.schema, spec.partition_schema,
                         replication_factor=spec.replication_factor, ...)

Mapping (kudu-facts §1.1, §1.4; Impala's `KuduUtil.fromImpalaType`):
- types: TINYINT/SMALLINT/INT/BIGINT -> INT8/16/32/64; BOOLEAN -> BOOL; FLOAT (REAL) -> FLOAT;
  DOUBLE -> DOUBLE; DECIMAL(p,s)/NUMERIC -> DECIMAL (bare DECIMAL is Impala's DECIMAL(9,0));
  STRING/TEXT -> STRING; VARCHAR(n) -> VARCHAR (VARCHAR without a length -> STRING);
  BINARY/BYTEA -> BINARY; DATE -> DATE; TIMESTAMP -> TIMESTAMP (UNIXTIME_MICROS).
  Unknown type names are 42704; known but unsupported ones (CHAR, arrays, JSON...) 0A000.
- identifiers: unquoted names fold to lower case (Postgres and Impala); quoted ones are kept.
- primary key: inline `PRIMARY KEY` or a table-level `PRIMARY KEY (a, b)`, never both; key
  columns are moved first in key order and are NOT NULL (an explicit NULL is an error). A
  table without a primary key is an error (42P16): this engine has no non-unique keys.
- partitioning: `HASH [(cols)] PARTITIONS n` levels then one `RANGE [(cols)] (...)`; no
  column list means every key column; `DISTRIBUTE BY HASH (cols) INTO n BUCKETS` is
  `PARTITION BY HASH (cols) PARTITIONS n`. Every partition column must be a key column
  (Impala's message). Bounds become `RangeSpec`s with values coerced to the column types;
  the engine (`PartitionSchema.create`) canonicalises and validates the rest.
- replication factor: TBLPROPERTIES 'kudu.num_tablet_replicas' or WITH (replication_factor
  = n); the catalog checks it against the tablet servers.
- column DEFAULT: a constant (literals, +/-, TRUE/FALSE/NULL, CAST, and upper/lower/concat
  of constants, as in Impala's example `DEFAULT upper('no fixed address')`).

Error SQLSTATEs: 42601 syntax (position from the parser), 42704 unknown type, 42P16 invalid
table definition, 22023 invalid values (e.g. an encoding not allowed for the type), 0A000
for Impala features this engine lacks (non-unique keys, SNAPPY/ZLIB, per-range hash schemas).
Positions are 1-based character offsets (PostgreSQL's `P`).

The other direction - a table as CREATE TABLE text (SHOW CREATE TABLE) and the declared
column order - is planner/ddl_sql.py's, re-exported here.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
from typing import Any

from sqlglot import exp

from engine import errors as engine_errors
from engine.catalog.partition import (
    HashBucketSchema,
    PartitionSchema,
    RangeSchema,
    RangeSpec,
)
from engine.schema import COMPRESSIONS, ENCODINGS, ColumnSchema, Schema
from engine.types import INTEGER_RANGES, DataType
from engine.types import sql_literal as typed_sql_literal
from planner.dialect import (
    KuduBlockSizeColumnConstraint,
    KuduCompressionColumnConstraint,
    KuduDistributeByProperty,
    KuduEncodingColumnConstraint,
    KuduHashPartition,
    KuduNonUniquePrimaryKeyColumnConstraint,
    KuduPartitionByProperty,
    KuduRangeBound,
    KuduRangePartition,
    KuduSQL,
    parse_sql,
)
from planner.ddl_sql import (  # noqa: F401 - re-exported: SHOW CREATE TABLE's side
    COLUMN_ORDER_PROPERTY,
    REPLICAS_PROPERTY,
    column_order_properties,
    column_sql,
    create_table_sql,
    declared_columns,
    partition_by_sql,
    quote_identifier,
    range_bound_sql,
    sql_literal,
    sql_type,
)
from planner.errors import (
    FeatureNotSupported,
    InvalidParameterValue,
    InvalidTableDefinition,
    SqlError,
    SqlSyntaxError,
    UndefinedObject,
)

T = exp.DataType.Type

_SIMPLE_TYPES = {
    T.TINYINT: DataType.INT8,
    T.SMALLINT: DataType.INT16,
    T.INT: DataType.INT32,
    T.BIGINT: DataType.INT64,
    T.FLOAT: DataType.FLOAT,
    T.DOUBLE: DataType.DOUBLE,
    T.TEXT: DataType.STRING,
    T.VARBINARY: DataType.BINARY,
    T.BINARY: DataType.BINARY,
    T.BLOB: DataType.BINARY,
    T.BOOLEAN: DataType.BOOL,
    T.DATE: DataType.DATE,
    T.TIMESTAMP: DataType.TIMESTAMP,
}
# Impala rejects CHAR (kudu-facts §1.4); the engine has no CHAR either.
_IMPALA_DEFAULT_DECIMAL = (9, 0)
_COMPRESSION_ALIASES = {"NONE": "NO_COMPRESSION", "DEFAULT": "DEFAULT_COMPRESSION"}
_KUDU_ONLY_COMPRESSIONS = {"SNAPPY", "ZLIB"}


@dataclasses.dataclass(frozen=True)
class PartitionSchemaArgs:
    """The arguments of `PartitionSchema.create` after the schema."""

    hash_schemas: tuple[HashBucketSchema, ...] = ()
    range_schema: RangeSchema | None = None
    range_partitions: tuple[RangeSpec, ...] | None = None

    def create(self, schema: Schema) -> PartitionSchema:
        return PartitionSchema.create(
            schema, self.hash_schemas, self.range_schema,
            None if self.range_partitions is None else list(self.range_partitions))


@dataclasses.dataclass(frozen=True)
class CreateTableSpec:
    name: str
    schema: Schema
    partition_schema_args: PartitionSchemaArgs
    partition_schema: PartitionSchema
    replication_factor: int | None = None
    if_not_exists: bool = False
    comment: str | None = None
    properties: dict[str, str] = dataclasses.field(default_factory=dict)
    column_comments: dict[str, str] = dataclasses.field(default_factory=dict)
    unpartitioned: bool = False  # Impala warns: "Unpartitioned Kudu tables are inefficient..."


# -- entry points ---------------------------------------------------------------------------

def parse(sql: str) -> list[exp.Expr]:
    """Parse KuduSQL text (planner.dialect.parse_sql: one node per statement); a syntax
    error becomes SqlSyntaxError (42601) in PostgreSQL's words with a position."""
    return parse_sql(sql)


def create_table_spec(sql_or_ast: str | exp.Expr) -> CreateTableSpec:
    """Map one CREATE TABLE statement (text or parsed) to a CreateTableSpec."""
    if isinstance(sql_or_ast, str):
        stmts = parse(sql_or_ast)
        if len(stmts) != 1:
            raise SqlSyntaxError(f"expected one statement, got {len(stmts)}")
        ast = stmts[0]
    else:
        ast = sql_or_ast
    if isinstance(ast, exp.Command):
        raise SqlSyntaxError(f'syntax error at or near "{ast.name or ast.sql()[:20]}"')
    if not isinstance(ast, exp.Create) or (ast.args.get("kind") or "").upper() != "TABLE":
        raise SqlSyntaxError("not a CREATE TABLE statement")
    return _Builder(ast).build()


def node_pos(node: exp.Expr | None) -> int | None:
    """The 1-based position of the first token of `node` that the parser located."""
    if node is None:
        return None
    starts = [s for n in node.walk() if (s := n.meta_get("start")) is not None]
    return min(starts) + 1 if starts else None


def fold_ident(node: exp.Expr) -> str:
    """Fold an identifier's case: unquoted -> lower case, quoted -> as written."""
    if isinstance(node, exp.Column):
        node = node.this
    if isinstance(node, exp.Identifier):
        return node.name if node.quoted else node.name.lower()
    return node.name.lower()


# -- the mapping ----------------------------------------------------------------------------

class _Builder:
    def __init__(self, create: exp.Create):
        self.create = create
        self._explicit_null: dict[str, bool] = {}   # columns declared NULL explicitly

    def build(self) -> CreateTableSpec:
        c = self.create
        if c.args.get("expression") is not None:
            raise FeatureNotSupported("CREATE TABLE ... AS SELECT is not supported",
                                      position=node_pos(c.args["expression"]))
        for flag in ("replace", "unique"):
            if c.args.get(flag):
                raise FeatureNotSupported(f"CREATE {flag.upper()} TABLE is not supported")
        schema_node = c.this
        if not isinstance(schema_node, exp.Schema):
            raise FeatureNotSupported("CREATE TABLE needs a column list",
                                      position=node_pos(schema_node))
        table = schema_node.this
        name = ".".join(fold_ident(p) for p in table.parts)
        columns, inline_key, table_key, key_pos, comments = self._columns(schema_node)
        if inline_key and table_key is not None:
            raise InvalidTableDefinition("Multiple primary keys specified. Only one primary "
                                         "key is allowed.", position=key_pos)
        if len(inline_key) > 1:
            raise InvalidTableDefinition(
                "Multiple columns are marked PRIMARY KEY; use PRIMARY KEY (a, b) for a "
                "compound key.", position=key_pos)
        key = table_key if table_key is not None else inline_key
        if not key:
            raise InvalidTableDefinition(
                f"A primary key is required for Kudu table '{name}' (add PRIMARY KEY (...)).",
                position=node_pos(schema_node))
        by_name = {col.name: col for col in columns}
        for k in key:
            if k not in by_name:
                raise InvalidTableDefinition(
                    f"PRIMARY KEY column '{k}' does not exist in the table.",
                    position=key_pos)
        if len(set(key)) != len(key):
            raise InvalidTableDefinition("PRIMARY KEY lists a column twice.", position=key_pos)
        for k in key:
            col = by_name[k]
            if self._explicit_null.get(k):
                raise InvalidTableDefinition(
                    f"Primary key columns cannot be nullable: {k}", position=key_pos)
            if not col.type.key_allowed:
                raise InvalidTableDefinition(
                    f"Type {col.type.name} is not allowed in a primary key column: {k}",
                    position=key_pos)
        try:
            schema = Schema(columns, key=key)
        except engine_errors.EngineError as e:
            raise InvalidTableDefinition(str(e), position=node_pos(schema_node)) from None

        props, rf, comment, ps_node = self._properties()
        args = self._partitioning(schema, ps_node)
        try:
            ps = args.create(schema)
        except engine_errors.EngineError as e:
            raise InvalidTableDefinition(str(e), position=node_pos(ps_node)) from None
        return CreateTableSpec(
            name=name, schema=schema, partition_schema_args=args, partition_schema=ps,
            replication_factor=rf, if_not_exists=bool(c.args.get("exists")),
            comment=comment, properties=props, column_comments=comments,
            unpartitioned=ps_node is None)

    # -- columns ------------------------------------------------------------------------------

    def _columns(self, schema_node: exp.Schema):
        columns: list[ColumnSchema] = []
        inline_key: list[str] = []
        table_key: list[str] | None = None
        key_pos: int | None = None
        comments: dict[str, str] = {}
        self._explicit_null: dict[str, bool] = {}
        self._unique: list[tuple[list[str], exp.Expr]] = []
        for item in schema_node.expressions:
            if isinstance(item, exp.Constraint) and len(item.expressions) == 1:
                item = item.expressions[0]        # CONSTRAINT name UNIQUE (...)
            if isinstance(item, exp.UniqueColumnConstraint) and \
                    isinstance(item.this, exp.Schema):
                self._unique.append(([fold_ident(e) for e in item.this.expressions], item))
                continue
            if isinstance(item, exp.PrimaryKey):
                if table_key is not None:
                    raise InvalidTableDefinition(
                        "Multiple primary keys specified. Only one primary key is allowed.",
                        position=node_pos(item))
                table_key = [fold_ident(e) for e in item.expressions]
                key_pos = node_pos(item)
                continue
            if not isinstance(item, exp.ColumnDef):
                raise FeatureNotSupported(
                    f"table constraint not supported: {item.sql(dialect=KuduSQL)}",
                    position=node_pos(item))
            col, is_key, comment = self.column(item)
            if is_key:
                inline_key.append(col.name)
                key_pos = key_pos or node_pos(item)
            if comment is not None:
                comments[col.name] = comment
            columns.append(col)
        key = set(table_key if table_key is not None else inline_key)
        for cols, node in self._unique:
            # Kudu enforces uniqueness only for the primary key: a UNIQUE constraint that the
            # key already implies (the key's columns or more) is accepted; any other would be
            # a promise the engine does not keep, so it is refused rather than ignored.
            if not key or not key <= set(cols):
                raise FeatureNotSupported(
                    f"UNIQUE ({', '.join(cols)}) is not supported: Kudu enforces uniqueness "
                    "only for the primary key (make these columns the primary key, or check "
                    "for duplicates before writing)", position=node_pos(node))
        return columns, inline_key, table_key, key_pos, comments

    def column(self, cdef: exp.ColumnDef) -> tuple[ColumnSchema, bool, str | None]:
        name = fold_ident(cdef.this)
        pos = node_pos(cdef)
        kind = cdef.args.get("kind")
        if kind is None:
            raise SqlSyntaxError(f"column '{name}' has no type", position=pos)
        dtype, params = _map_type(kind, name, node_pos(kind) or pos)
        kw: dict[str, Any] = dict(params)
        is_key = False
        comment = None
        default_node = None
        for cc in cdef.constraints:
            k = cc.kind
            match k:
                case exp.PrimaryKeyColumnConstraint():
                    is_key = True
                case exp.UniqueColumnConstraint():
                    self._unique.append(([name], cc))     # checked against the key later
                case KuduNonUniquePrimaryKeyColumnConstraint():
                    raise FeatureNotSupported(
                        "NON UNIQUE PRIMARY KEY is not supported (no auto-incrementing "
                        "key column)", position=node_pos(cdef))
                case exp.NotNullColumnConstraint():
                    if k.args.get("allow_null"):
                        self._explicit_null[name] = True
                        kw["nullable"] = True
                    else:
                        kw["nullable"] = False
                case exp.DefaultColumnConstraint():
                    default_node = k.this
                case exp.CommentColumnConstraint():
                    comment = k.this.name if isinstance(k.this, exp.Literal) else k.this.sql()
                case KuduEncodingColumnConstraint():
                    enc = k.this.name.upper()
                    if enc not in ENCODINGS:
                        raise InvalidParameterValue(
                            f"unknown encoding {k.this.name!r} for column '{name}' (known: "
                            f"{', '.join(ENCODINGS)})", position=node_pos(k) or pos)
                    kw["encoding"] = enc
                case KuduCompressionColumnConstraint():
                    comp = k.this.name.upper()
                    comp = _COMPRESSION_ALIASES.get(comp, comp)
                    if comp in _KUDU_ONLY_COMPRESSIONS:
                        raise FeatureNotSupported(
                            f"compression {comp} is not supported by this engine (supported: "
                            f"{', '.join(COMPRESSIONS)})", position=node_pos(k) or pos)
                    if comp not in COMPRESSIONS:
                        raise InvalidParameterValue(
                            f"unknown compression {k.this.name!r} for column '{name}'",
                            position=node_pos(k) or pos)
                    kw["compression"] = comp
                case KuduBlockSizeColumnConstraint():
                    n = _int_literal(k.this)
                    if n is None or n <= 0:
                        raise InvalidParameterValue(
                            f"BLOCK_SIZE must be a positive integer (column '{name}')",
                            position=node_pos(k) or pos)
                    kw["block_size"] = n
                case _:
                    raise FeatureNotSupported(
                        f"column attribute not supported: {cc.sql(dialect=KuduSQL)}",
                        position=node_pos(cc) or pos)
        try:
            col = ColumnSchema(name, dtype, **kw)
        except engine_errors.EngineError as e:
            raise SqlError.from_engine(e, pos) from None
        if default_node is not None:
            try:
                value = _coerce(_fold(default_node), col)
            except (ValueError, ArithmeticError, TypeError) as e:
                raise InvalidParameterValue(
                    f"invalid DEFAULT for column '{name}': {e}",
                    position=node_pos(default_node) or pos) from None
            if value is None and col.nullable is False:
                raise InvalidTableDefinition(
                    f"column '{name}' is NOT NULL and cannot have a NULL default",
                    position=node_pos(default_node) or pos)
            col = dataclasses.replace(col, default=value)
        return col, is_key, comment

    # -- properties ---------------------------------------------------------------------------

    def _properties(self):
        props: dict[str, str] = {}
        rf: int | None = None
        comment = None
        stored = None
        ps_node: exp.Expr | None = None
        node = self.create.args.get("properties")
        for p in node.expressions if node else []:
            match p:
                case KuduPartitionByProperty() | KuduDistributeByProperty():
                    if ps_node is not None:
                        raise InvalidTableDefinition(
                            "partitioning is specified more than once", position=node_pos(p))
                    ps_node = p
                case exp.FileFormatProperty():
                    stored = p.this.name.upper()
                    if stored != "KUDU":
                        raise FeatureNotSupported(
                            f"only STORED AS KUDU is supported (got {p.this.name})",
                            position=node_pos(p))
                case exp.SchemaCommentProperty():
                    comment = p.this.name
                case exp.Property() if type(p) is exp.Property:
                    key = p.this.name
                    value = p.args["value"]
                    text = value.name if isinstance(value, (exp.Literal, exp.Var,
                                                           exp.Identifier)) else value.sql()
                    props[key] = text
                    if key.lower() in (REPLICAS_PROPERTY, "replication_factor"):
                        try:
                            n = int(text)
                        except ValueError:
                            raise InvalidParameterValue(
                                f"invalid replication factor {text!r} for {key}",
                                position=node_pos(p)) from None
                        if rf is not None and rf != n:
                            raise InvalidParameterValue(
                                f"conflicting replication factors {rf} and {n}",
                                position=node_pos(p))
                        rf = n
                case _:
                    raise FeatureNotSupported(
                        f"table property not supported: {p.sql(dialect=KuduSQL)}",
                        position=node_pos(p))
        return props, rf, comment, ps_node

    # -- partitioning -------------------------------------------------------------------------

    def _partitioning(self, schema: Schema, node: exp.Expr | None) -> PartitionSchemaArgs:
        if node is None:
            return PartitionSchemaArgs()
        key_names = schema.key_names
        if isinstance(node, KuduDistributeByProperty):
            levels: list[exp.Expr] = [KuduHashPartition(expressions=node.expressions,
                                                        buckets=node.args["buckets"])]
        else:
            levels = list(node.expressions)
        hashes: list[HashBucketSchema] = []
        range_schema = None
        ranges = None
        for level in levels:
            cols = [fold_ident(c) for c in level.expressions]
            text = level.sql(dialect=KuduSQL)
            for c, cnode in zip(cols, level.expressions):
                if c not in key_names:
                    raise InvalidTableDefinition(
                        f"Column '{c}' in '{text}' is not a key column. Only key columns can "
                        f"be used in PARTITION BY.", position=node_pos(cnode))
            if isinstance(level, KuduHashPartition):
                n = _int_literal(level.args["buckets"])
                if n is None:
                    raise InvalidTableDefinition(f"invalid number of buckets in '{text}'",
                                                 position=node_pos(level))
                hashes.append(HashBucketSchema(tuple(cols), n))
            else:
                assert isinstance(level, KuduRangePartition)
                cols = cols or list(key_names)
                range_schema = RangeSchema(tuple(cols))
                rcols = [schema.column(c) for c in cols]
                ranges = tuple(self.range_spec(b, rcols)
                               for b in level.args.get("bounds") or [])
        return PartitionSchemaArgs(tuple(hashes), range_schema, ranges)

    def range_spec(self, b: KuduRangeBound, cols: list[ColumnSchema]) -> RangeSpec:
        if b.args.get("hash"):
            raise FeatureNotSupported("range-specific hash schemas are not supported",
                                      position=node_pos(b.args["hash"][0]) or node_pos(b))

        def val(node: exp.Expr):
            items = node.expressions if isinstance(node, exp.Tuple) else [node]
            if len(items) != len(cols):
                raise InvalidTableDefinition(
                    f"range bound {node.sql(dialect=KuduSQL)} has {len(items)} value(s); the "
                    f"range key ({', '.join(c.name for c in cols)}) has {len(cols)}",
                    position=node_pos(node))
            out = []
            for item, col in zip(items, cols):
                try:
                    v = _coerce(_fold(item), col)
                except (ValueError, ArithmeticError, TypeError) as e:
                    raise InvalidTableDefinition(
                        f"invalid range bound {item.sql(dialect=KuduSQL)} for column "
                        f"'{col.name}' ({col.type_sql()}): {e}", position=node_pos(item)) from None
                if v is None:
                    raise InvalidTableDefinition("range bounds cannot be NULL",
                                                 position=node_pos(item))
                out.append(v)
            return out[0] if len(out) == 1 else tuple(out)

        if b.args.get("value") is not None:
            return RangeSpec.value(val(b.args["value"]))
        lower = b.args.get("lower")
        upper = b.args.get("upper")
        return RangeSpec(
            None if lower is None else val(lower), None if upper is None else val(upper),
            lower_inclusive=b.args.get("lower_op") != "<",
            upper_inclusive=b.args.get("upper_op") == "<=")


# -- types and constants --------------------------------------------------------------------

def _map_type(kind: exp.DataType, column: str, pos: int | None) -> tuple[DataType, dict]:
    t = kind.this
    params = [_int_literal(e.this if isinstance(e, exp.DataTypeParam) else e)
              for e in kind.expressions]
    if t in (T.DECIMAL, T.BIGDECIMAL):
        if any(p is None for p in params) or len(params) > 2:
            raise SqlSyntaxError(f"invalid DECIMAL parameters for column '{column}'",
                                 position=pos)
        p, s = (params + [0])[:2] if params else _IMPALA_DEFAULT_DECIMAL
        return DataType.DECIMAL, {"precision": p, "scale": s}
    if t in (T.VARCHAR, T.NVARCHAR):
        if not params:
            return DataType.STRING, {}
        if params[0] is None or len(params) != 1:
            raise SqlSyntaxError(f"invalid VARCHAR length for column '{column}'", position=pos)
        return DataType.VARCHAR, {"length": params[0]}
    if t in _SIMPLE_TYPES and not params:
        return _SIMPLE_TYPES[t], {}
    if t is T.USERDEFINED:
        tname = kind.args["kind"].name if kind.args.get("kind") is not None else kind.sql()
        raise UndefinedObject(f'type "{tname.lower()}" does not exist', position=pos)
    raise FeatureNotSupported(
        f"type {kind.sql(dialect=KuduSQL)} is not supported for Kudu tables (column "
        f"'{column}')", position=pos)


def _int_literal(node: exp.Expr | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(node.this)
        except ValueError:
            return None
    if isinstance(node, exp.Neg):
        v = _int_literal(node.this)
        return None if v is None else -v
    return None


_STRING_FUNCS = {
    "UPPER": lambda *a: a[0].upper(),
    "LOWER": lambda *a: a[0].lower(),
    "CONCAT": lambda *a: "".join(a),
}


def _fold(node: exp.Expr) -> Any:
    """Evaluate a constant expression to a Python value (str, int, Decimal, bool, None)."""
    match node:
        case exp.Null():
            return None
        case exp.Boolean():
            return bool(node.this)
        case exp.Literal(is_string=True):
            return node.this
        case exp.Literal():
            text = node.this
            if any(ch in text for ch in ".eE"):
                return decimal.Decimal(text)
            return int(text)
        case exp.Paren():
            return _fold(node.this)
        case exp.Neg():
            v = _fold(node.this)
            return None if v is None else -v
        case exp.Cast() | exp.TryCast():
            return _fold(node.this)
        case exp.Upper() | exp.Lower():
            v = _fold(node.this)
            return None if v is None else _STRING_FUNCS[node.key.upper()](str(v))
        case exp.Concat():
            vals = [_fold(e) for e in node.expressions]
            return None if any(v is None for v in vals) else "".join(map(str, vals))
        case exp.DPipe():
            a, b = _fold(node.this), _fold(node.expression)
            return None if a is None or b is None else f"{a}{b}"
        case exp.Add() | exp.Sub() | exp.Mul():
            a, b = _fold(node.this), _fold(node.expression)
            if a is None or b is None:
                return None
            return a + b if isinstance(node, exp.Add) else a - b if isinstance(
                node, exp.Sub) else a * b
    raise ValueError(f"not a constant: {node.sql(dialect=KuduSQL)}")


def _coerce(v: Any, col: ColumnSchema) -> Any:
    """A folded constant -> the Python value of `col`'s logical type (None stays None)."""
    if v is None:
        return None
    t = col.type
    if t.is_integer:
        if isinstance(v, (bool, str)):
            raise ValueError(f"{typed_sql_literal(v)} is not an integer")
        if isinstance(v, decimal.Decimal):
            if v != v.to_integral_value():
                raise ValueError(f"{v} is not an integer")
            v = int(v)
        lo, hi = INTEGER_RANGES[t]
        if not lo <= v <= hi:
            raise ValueError(f"{v} is out of range for {t.name}")
        return int(v)
    if t in (DataType.FLOAT, DataType.DOUBLE):
        if isinstance(v, (bool, str)):
            raise ValueError(f"{typed_sql_literal(v)} is not a number")
        return float(v)
    if t is DataType.DECIMAL:
        if isinstance(v, (bool, str)):
            raise ValueError(f"{typed_sql_literal(v)} is not a number")
        d = decimal.Decimal(v)
        q = d.quantize(decimal.Decimal(1).scaleb(-col.scale))
        if q != d or len(q.as_tuple().digits) > col.precision and q != 0:
            raise ValueError(f"{v} does not fit {col.type_sql()}")
        return q
    if t is DataType.BOOL:
        if not isinstance(v, bool):
            raise ValueError(f"{typed_sql_literal(v)} is not a boolean")
        return v
    if t in (DataType.STRING, DataType.VARCHAR):
        if not isinstance(v, str):
            raise ValueError(f"{typed_sql_literal(v)} is not a string")
        return v[: col.length] if t is DataType.VARCHAR else v
    if t is DataType.BINARY:
        if not isinstance(v, str):
            raise ValueError(f"{typed_sql_literal(v)} is not a string")
        return v.encode()
    if t is DataType.DATE:
        if not isinstance(v, str):
            raise ValueError(f"{typed_sql_literal(v)} is not a date string")
        try:
            return _dt.date.fromisoformat(v.strip())
        except ValueError:
            raise ValueError(f"{typed_sql_literal(v)} is not a valid date") from None
    if t is DataType.TIMESTAMP:
        if not isinstance(v, str):
            raise ValueError(f"{typed_sql_literal(v)} is not a timestamp string")
        try:
            ts = _dt.datetime.fromisoformat(v.strip())
        except ValueError:
            raise ValueError(f"{typed_sql_literal(v)} is not a valid timestamp") from None
        if ts.tzinfo is not None:
            ts = ts.astimezone(_dt.UTC).replace(tzinfo=None)
        return ts
    raise ValueError(f"cannot convert {typed_sql_literal(v)} to {t.name}")


# -- utility statements (used by planner.utility) -------------------------------------------

def column_from_def(cdef: exp.ColumnDef) -> tuple[ColumnSchema, bool, str | None]:
    """One column definition, as in CREATE TABLE -> (column, marked PRIMARY KEY, comment).

    For ALTER TABLE ADD COLUMN; the errors are CREATE TABLE's (42704, 0A000, 22023...).
    """
    return _Builder(exp.Create()).column(cdef)


def range_spec(bound: KuduRangeBound, columns: list[ColumnSchema]) -> RangeSpec:
    """One `PARTITION ...` bound -> a RangeSpec over the range columns `columns` (values
    coerced to their types, as in CREATE TABLE's PARTITION BY RANGE)."""
    return _Builder(exp.Create()).range_spec(bound, columns)
