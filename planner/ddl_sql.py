"""Tables back to SQL text: SHOW CREATE TABLE, and the declared column order.

The reverse of planner/ddl.py: an engine `Schema` and `PartitionSchema` as the CREATE
TABLE statement that makes them (`create_table_sql`; `partition_by_sql`,
`range_bound_sql`, `column_sql`, `sql_type`, `sql_literal`, `quote_identifier`), in the
KuduSQL dialect so that the text parses back to the same table (tests/planner/
test_utility.py round-trips it). And the declared column order: the engine stores key
columns first, SQL users expect the order they declared, kept in a table property
(`column_order_properties`, `declared_columns`). planner.ddl re-exports all of it.
"""

from __future__ import annotations

from typing import Any

from engine.catalog.partition import PartitionSchema, RangePartition, RangeSpec
from engine.schema import ColumnSchema, Schema
from engine.types import DataType
from engine.types import sql_literal as typed_sql_literal
from planner.dialect import KuduSQL

REPLICAS_PROPERTY = "kudu.num_tablet_replicas"

_TYPE_SQL = {
    DataType.INT8: "TINYINT", DataType.INT16: "SMALLINT", DataType.INT32: "INT",
    DataType.INT64: "BIGINT", DataType.FLOAT: "FLOAT", DataType.DOUBLE: "DOUBLE",
    DataType.STRING: "STRING", DataType.BINARY: "BINARY", DataType.BOOL: "BOOLEAN",
    DataType.DATE: "DATE", DataType.TIMESTAMP: "TIMESTAMP",
}
_BYTES_TYPES = (DataType.STRING, DataType.VARCHAR, DataType.BINARY)


def sql_type(col: ColumnSchema) -> str:
    """The KuduSQL spelling of a column's type: BIGINT, DECIMAL(15,2), VARCHAR(10), STRING."""
    match col.type:
        case DataType.DECIMAL:
            return f"DECIMAL({col.precision},{col.scale})"
        case DataType.VARCHAR:
            return f"VARCHAR({col.length})"
    return _TYPE_SQL[col.type]


def quote_identifier(name: str) -> str:
    """`name` as written in KuduSQL: bare if it is a lower-case non-keyword identifier (it
    reads back as itself), else double-quoted (keywords too, even those sqlglot would accept
    as names: `"name" STRING`)."""
    if name.isidentifier() and name.isascii() and name == name.lower() \
            and name.upper() not in KuduSQL.Tokenizer.KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def sql_literal(value: Any) -> str:
    """A constant (a DEFAULT or range bound value) as a KuduSQL literal that `_coerce`
    turns back into the same value for the column's type: `engine.types.sql_literal`
    untyped (the column gives the type), BINARY values as their text."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return typed_sql_literal(value, typed=False)


def _tuple_sql(values: tuple) -> str:
    parts = [sql_literal(v) for v in values]
    return parts[0] if len(parts) == 1 else f"({', '.join(parts)})"


def _strip_successor(values: tuple, col: ColumnSchema) -> tuple | None:
    """`values` minus Kudu's IncrementKey on a string/binary last column (a trailing NUL),
    or None: `'a' < VALUES` is stored as the lower bound 'a\\0'."""
    last = values[-1]
    if col.type in _BYTES_TYPES and isinstance(last, (str, bytes)) and last[-1:] in (
            "\0", b"\0"):
        return values[:-1] + (last[:-1],)
    return None


def range_bound_sql(ps: PartitionSchema, rp: RangePartition) -> str:
    """A canonical range partition as a `PARTITION ...` bound that reads back as itself."""
    if rp.lower is None and rp.upper is None:
        return "PARTITION UNBOUNDED"
    by_name = {c.name: c for c in ps.key_columns}
    cols = [by_name[c] for c in ps.range_schema.columns]
    if rp.lower is not None and rp.upper is not None:
        v = rp.lower if len(rp.lower) > 1 else rp.lower[0]
        if ps.canonical_range(RangeSpec.value(v)) == rp:
            return f"PARTITION VALUE = {_tuple_sql(rp.lower)}"
    out = "PARTITION "
    if rp.lower is not None:
        exclusive = _strip_successor(rp.lower, cols[-1])
        out += f"{_tuple_sql(exclusive or rp.lower)} {'<' if exclusive else '<='} "
    out += "VALUES"
    if rp.upper is not None:
        inclusive = _strip_successor(rp.upper, cols[-1])
        out += f" {'<=' if inclusive else '<'} {_tuple_sql(inclusive or rp.upper)}"
    return out


def partition_by_sql(ps: PartitionSchema) -> str | None:
    """The PARTITION BY clause of a partition schema (None: unpartitioned). Hash seeds, which
    only the engine API sets, have no SQL spelling and are left out."""
    levels = [f"HASH ({', '.join(quote_identifier(c) for c in h.columns)}) PARTITIONS "
              f"{h.num_buckets}" for h in ps.hash_schemas]
    if ps.range_schema.columns:
        cols = ", ".join(quote_identifier(c) for c in ps.range_schema.columns)
        bounds = ",\n    ".join(range_bound_sql(ps, rp) for rp in ps.range_partitions)
        levels.append(f"RANGE ({cols}) ({f'{chr(10)}    {bounds}{chr(10)}' if bounds else ''})")
    return f"PARTITION BY {', '.join(levels)}" if levels else None


def column_sql(col: ColumnSchema) -> str:
    """A column definition: name, type and every non-default attribute."""
    out = f"{quote_identifier(col.name)} {sql_type(col)}"
    if not col.nullable:
        out += " NOT NULL"
    if col.default is not None:
        out += f" DEFAULT {sql_literal(col.default)}"
    if col.encoding != "AUTO_ENCODING":
        out += f" ENCODING {col.encoding}"
    if col.compression != "DEFAULT_COMPRESSION":
        out += f" COMPRESSION {col.compression}"
    if col.block_size is not None:
        out += f" BLOCK_SIZE {col.block_size}"
    return out


def create_table_sql(name: str, schema: Schema, partition_schema: PartitionSchema, *,
                     replication_factor: int | None = None, comment: str | None = None,
                     properties: dict[str, str] | None = None) -> str:
    """SHOW CREATE TABLE: a CREATE TABLE statement that `create_table_spec` maps back to the
    same schema (column ids aside) and partition schema."""
    lines = [f"  {column_sql(c)}," for c in schema.columns]
    lines.append(f"  PRIMARY KEY ({', '.join(quote_identifier(k) for k in schema.key_names)})")
    out = f"CREATE TABLE {'.'.join(quote_identifier(p) for p in name.split('.'))} (\n"
    out += "\n".join(lines) + "\n)"
    pb = partition_by_sql(partition_schema)
    if pb:
        out += f"\n{pb}"
    if comment is not None:
        out += f"\nCOMMENT {sql_literal(comment)}"
    out += "\nSTORED AS KUDU"
    props = {k: v for k, v in (properties or {}).items()
             if k.lower() not in (REPLICAS_PROPERTY, "replication_factor")}
    if replication_factor is not None:
        props = {REPLICAS_PROPERTY: str(replication_factor), **props}
    if props:
        items = ", ".join(f"{sql_literal(k)}={sql_literal(str(v))}" for k, v in props.items())
        out += f"\nTBLPROPERTIES ({items})"
    return out


# -- declared column order -------------------------------------------------------------------
# The engine stores key columns first (Kudu's rule); SQL users expect `SELECT *`, DESCRIBE and
# INSERT without a column list to follow the order they declared. That order is kept in a
# table property when it differs from the storage order.
COLUMN_ORDER_PROPERTY = "kudusql.column_order"


def column_order_properties(declared: list[str], schema: Schema, properties: dict) -> dict:
    """`properties` plus the declared column order when it is not the storage order."""
    out = dict(properties or {})
    if list(declared) != list(schema.names):
        import json
        out[COLUMN_ORDER_PROPERTY] = json.dumps(list(declared))
    return out


def declared_columns(table) -> list[str]:
    """Column names in declared order (storage order for tables without the property;
    columns added or renamed later go last)."""
    import json
    names = list(table.schema.names)
    meta = getattr(table, "metadata", None)
    raw = (getattr(meta, "properties", None) or {}).get(COLUMN_ORDER_PROPERTY)
    if not raw:
        return names
    try:
        declared = [c for c in json.loads(raw) if c in names]
    except ValueError:
        return names
    return declared + [c for c in names if c not in declared]
