"""Schema: ordered columns, each with a stable id, and an ordered primary key.

Contract (Kudu's rules):
- A schema has at least one key column; key columns come first, in key order, and are
  NOT NULL. BOOL, FLOAT and DOUBLE cannot be key columns.
- Each column has an id that never changes and is never reused, so files written before an
  ALTER TABLE ADD/DROP COLUMN still name their columns unambiguously.
- Column names are case-sensitive here; the SQL layer folds case before calling in.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
from typing import Any, Iterable

import pyarrow as pa

from engine import errors
from engine.types import (
    MAX_DECIMAL_PRECISION,
    MAX_VARCHAR_LENGTH,
    DataType,
    arrow_type,
    physical_type,
)

ENCODINGS = ("AUTO_ENCODING", "PLAIN_ENCODING", "PREFIX_ENCODING", "RLE", "DICT_ENCODING",
             "BIT_SHUFFLE", "FOR_ENCODING")
COMPRESSIONS = ("DEFAULT_COMPRESSION", "NO_COMPRESSION", "LZ4")

_INT_ENCODINGS = {"AUTO_ENCODING", "PLAIN_ENCODING", "BIT_SHUFFLE", "RLE", "FOR_ENCODING"}
# Kudu's table of encodings per type (kudu-facts §2.2), plus FOR for integers.
ALLOWED_ENCODINGS = {
    DataType.INT8: _INT_ENCODINGS, DataType.INT16: _INT_ENCODINGS,
    DataType.INT32: _INT_ENCODINGS, DataType.INT64: _INT_ENCODINGS,
    DataType.DATE: _INT_ENCODINGS, DataType.TIMESTAMP: _INT_ENCODINGS,
    DataType.FLOAT: {"AUTO_ENCODING", "PLAIN_ENCODING", "BIT_SHUFFLE"},
    DataType.DOUBLE: {"AUTO_ENCODING", "PLAIN_ENCODING", "BIT_SHUFFLE"},
    DataType.DECIMAL: {"AUTO_ENCODING", "PLAIN_ENCODING", "BIT_SHUFFLE"},
    DataType.BOOL: {"AUTO_ENCODING", "PLAIN_ENCODING", "RLE"},
    DataType.STRING: {"AUTO_ENCODING", "PLAIN_ENCODING", "PREFIX_ENCODING", "DICT_ENCODING"},
    DataType.VARCHAR: {"AUTO_ENCODING", "PLAIN_ENCODING", "PREFIX_ENCODING", "DICT_ENCODING"},
    DataType.BINARY: {"AUTO_ENCODING", "PLAIN_ENCODING", "PREFIX_ENCODING", "DICT_ENCODING"},
}


@dataclasses.dataclass(frozen=True)
class ColumnSchema:
    name: str
    type: DataType
    nullable: bool = True
    precision: int | None = None  # DECIMAL
    scale: int | None = None  # DECIMAL
    length: int | None = None  # VARCHAR(n)
    default: Any = None  # Python value, None = NULL
    encoding: str = "AUTO_ENCODING"
    compression: str = "DEFAULT_COMPRESSION"
    block_size: int | None = None
    id: int = -1  # assigned by Schema

    def __post_init__(self) -> None:
        if self.type is DataType.DECIMAL:
            p, s = self.precision, self.scale if self.scale is not None else 0
            if p is None or not 1 <= p <= MAX_DECIMAL_PRECISION or not 0 <= s <= p:
                raise errors.InvalidArgument(
                    f"column {self.name!r}: DECIMAL precision must be 1..38 and scale 0..precision"
                    f" (got {p}, {s})")
            object.__setattr__(self, "scale", s)
        if self.type is DataType.VARCHAR and (
                self.length is None or not 1 <= self.length <= MAX_VARCHAR_LENGTH):
            raise errors.InvalidArgument(
                f"column {self.name!r}: VARCHAR length must be 1..{MAX_VARCHAR_LENGTH}")
        if self.encoding not in ENCODINGS:
            raise errors.InvalidArgument(f"column {self.name!r}: unknown encoding {self.encoding}")
        if self.encoding not in ALLOWED_ENCODINGS[self.type]:
            raise errors.InvalidArgument(
                f"column {self.name!r}: encoding {self.encoding} is not supported for type "
                f"{self.type.name} (allowed: {', '.join(sorted(ALLOWED_ENCODINGS[self.type]))})")
        if self.compression not in COMPRESSIONS:
            raise errors.InvalidArgument(
                f"column {self.name!r}: unknown compression {self.compression}")

    @property
    def arrow_type(self) -> pa.DataType:
        return arrow_type(self.type, self.precision, self.scale)

    @property
    def physical_type(self) -> pa.DataType:
        return physical_type(self.type, self.precision)

    def type_sql(self) -> str:
        match self.type:
            case DataType.DECIMAL:
                return f"DECIMAL({self.precision},{self.scale})"
            case DataType.VARCHAR:
                return f"VARCHAR({self.length})"
        return self.type.name

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["type"] = self.type.value
        d["default"] = _default_to_json(self.default)
        return d

    @staticmethod
    def from_dict(d: dict) -> "ColumnSchema":
        d = dict(d)
        d["type"] = DataType(d["type"])
        d["default"] = _default_from_json(d.get("default"))
        return ColumnSchema(**d)


def _default_to_json(v: Any) -> Any:
    """DEFAULT values as JSON: tagged strings for types JSON has no literal for."""
    if isinstance(v, decimal.Decimal):
        return {"decimal": str(v)}
    if isinstance(v, _dt.datetime):
        return {"timestamp": v.isoformat()}
    if isinstance(v, _dt.date):
        return {"date": v.isoformat()}
    if isinstance(v, (bytes, bytearray)):
        return {"binary": bytes(v).hex()}
    return v


def _default_from_json(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    (tag, s), = v.items()
    return {"decimal": decimal.Decimal, "timestamp": _dt.datetime.fromisoformat,
            "date": _dt.date.fromisoformat, "binary": bytes.fromhex}[tag](s)


class Schema:
    """An ordered list of columns whose first `num_key_columns` form the primary key."""

    def __init__(self, columns: Iterable[ColumnSchema], key: Iterable[str] | None = None,
                 num_key_columns: int | None = None, next_column_id: int | None = None):
        cols = list(columns)
        names = [c.name for c in cols]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise errors.InvalidArgument(f"column {dup!r} specified more than once")
        if key is not None:
            key = list(key)
            by_name = {c.name: c for c in cols}
            missing = [k for k in key if k not in by_name]
            if missing:
                raise errors.InvalidArgument(f"primary key column {missing[0]!r} does not exist")
            if len(set(key)) != len(key):
                raise errors.InvalidArgument("primary key lists a column twice")
            # Key columns first, in key order (Kudu requires this physical layout).
            cols = [by_name[k] for k in key] + [c for c in cols if c.name not in set(key)]
            num_key_columns = len(key)
        if not num_key_columns:
            raise errors.InvalidArgument("a table must have a primary key")
        names = [c.name for c in cols]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise errors.InvalidArgument(f"column {dup!r} specified more than once")
        next_id = next_column_id if next_column_id is not None else 0
        fixed = []
        for i, c in enumerate(cols):
            if c.id < 0:
                c = dataclasses.replace(c, id=next_id)
            next_id = max(next_id, c.id + 1)
            if i < num_key_columns:
                if not c.type.key_allowed:
                    raise errors.InvalidArgument(
                        f"key column {c.name!r} may not have type {c.type.name}")
                if c.nullable:
                    c = dataclasses.replace(c, nullable=False)
            fixed.append(c)
        ids = [c.id for c in fixed]
        if len(set(ids)) != len(ids):
            raise errors.InvalidArgument(f"column ids must be unique: {ids}")
        self.columns: tuple[ColumnSchema, ...] = tuple(fixed)
        self.num_key_columns = num_key_columns
        self.next_column_id = next_id
        self._by_name = {c.name: i for i, c in enumerate(self.columns)}
        self._by_id = {c.id: i for i, c in enumerate(self.columns)}

    # -- lookups -------------------------------------------------------------------------
    @property
    def key_columns(self) -> tuple[ColumnSchema, ...]:
        return self.columns[: self.num_key_columns]

    @property
    def non_key_columns(self) -> tuple[ColumnSchema, ...]:
        """The columns after the key (the ones an UPDATE may change)."""
        return self.columns[self.num_key_columns:]

    @property
    def key_names(self) -> list[str]:
        return [c.name for c in self.key_columns]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def index_of(self, name: str) -> int:
        try:
            return self._by_name[name]
        except KeyError:
            raise errors.ColumnNotFound(f'column "{name}" does not exist') from None

    def column(self, name: str) -> ColumnSchema:
        return self.columns[self.index_of(name)]

    def column_by_id(self, col_id: int) -> ColumnSchema:
        return self.columns[self._by_id[col_id]]

    def has_column_id(self, col_id: int) -> bool:
        return col_id in self._by_id

    def position_of_id(self, col_id: int) -> int | None:
        """Position of the column with this id, None if this schema has no such column
        (it was added after, or dropped before, whatever holds this schema)."""
        return self._by_id.get(col_id)

    def is_key(self, name: str) -> bool:
        return self.index_of(name) < self.num_key_columns

    def arrow_schema(self, names: Iterable[str] | None = None) -> pa.Schema:
        cols = self.columns if names is None else [self.column(n) for n in names]
        return pa.schema([pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in cols])

    # -- evolution -------------------------------------------------------------------------
    def add_column(self, col: ColumnSchema) -> "Schema":
        if self.has_column(col.name):
            raise errors.InvalidArgument(f'column "{col.name}" already exists')
        if not col.nullable and col.default is None:
            raise errors.InvalidArgument("A new non-null column must have a default value")
        col = dataclasses.replace(col, id=self.next_column_id)
        return Schema(self.columns + (col,), num_key_columns=self.num_key_columns,
                      next_column_id=self.next_column_id + 1)

    def drop_column(self, name: str) -> "Schema":
        if self.is_key(name):
            raise errors.InvalidArgument(f'cannot drop primary key column "{name}"')
        return Schema([c for c in self.columns if c.name != name],
                      num_key_columns=self.num_key_columns, next_column_id=self.next_column_id)

    def rename_column(self, old: str, new: str) -> "Schema":
        if self.has_column(new):
            raise errors.InvalidArgument(f'column "{new}" already exists')
        col = self.column(old)
        cols = [dataclasses.replace(c, name=new) if c.name == old else c for c in self.columns]
        del col
        return Schema(cols, num_key_columns=self.num_key_columns,
                      next_column_id=self.next_column_id)

    # -- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"columns": [c.to_dict() for c in self.columns],
                "num_key_columns": self.num_key_columns,
                "next_column_id": self.next_column_id}

    @staticmethod
    def from_dict(d: dict) -> "Schema":
        return Schema([ColumnSchema.from_dict(c) for c in d["columns"]],
                      num_key_columns=d["num_key_columns"], next_column_id=d["next_column_id"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        cols = ", ".join(f"{c.name} {c.type_sql()}{'' if c.nullable else ' NOT NULL'}"
                         for c in self.columns)
        return f"Schema({cols}, PRIMARY KEY ({', '.join(self.key_names)}))"
