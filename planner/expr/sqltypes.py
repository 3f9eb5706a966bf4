"""SQL types of Arrow types: the kind of a type (`kind_of`), PostgreSQL's and SQL's
names for it, the common type of several (`supertype`), typed NULLs and unknown literals,
SQL type names -> Arrow types (`named_type`), and the SQL array type (`ArrayType`, an
extension type over the array's text form). Imports arrow_values and decimal_types.
"""

from __future__ import annotations

import re

import pyarrow as pa
from sqlglot import exp

from planner.errors import UndefinedObject
from planner.expr.arrow_values import Value
from planner.expr.decimal_types import DEFAULT_NUMERIC, cap_precision, int_as_decimal_type
from planner.expr.located import node_position


INTERVAL = pa.month_day_nano_interval()


TIMESTAMP = pa.timestamp("us")


TIMESTAMPTZ = pa.timestamp("us", tz="UTC")      # timestamptz: an instant (planner.expr.timezones)


def kind_of(t: pa.DataType) -> str:
    """The SQL type family of an Arrow type."""
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if t == INTERVAL:
        return "interval"
    if pa.types.is_time(t):
        return "time"
    if isinstance(t, ArrayType) or pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list"
    return "other"


NUMERIC_KINDS = ("int", "float", "decimal")


def pg_name(t: pa.DataType) -> str:
    """PostgreSQL's name for an Arrow type (for error messages)."""
    k = kind_of(t)
    if k == "int":
        return {8: "tinyint", 16: "smallint", 32: "integer", 64: "bigint"}[t.bit_width]
    if k == "float":
        return "real" if t.bit_width == 32 else "double precision"
    if k == "list":
        return pg_name(t.value_type) + "[]"
    if k == "timestamp" and t.tz:
        return "timestamp with time zone"
    return {"null": "unknown", "bool": "boolean", "decimal": "numeric", "string": "text",
            "binary": "bytea", "date": "date", "timestamp": "timestamp without time zone",
            "interval": "interval", "time": "time without time zone"}.get(k, str(t))


def sql_type(t: pa.DataType) -> str:
    """A SQL spelling of an Arrow type (for rendering typed constants)."""
    k = kind_of(t)
    if k == "int":
        return {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}[t.bit_width]
    if k == "float":
        return "REAL" if t.bit_width == 32 else "DOUBLE PRECISION"
    if k == "decimal":
        return f"DECIMAL({t.precision}, {t.scale})"
    if k == "list":
        return sql_type(t.value_type) + "[]"
    if k == "timestamp" and t.tz:
        return "TIMESTAMPTZ"
    return {"bool": "BOOLEAN", "string": "TEXT", "binary": "BYTEA", "date": "DATE",
            "timestamp": "TIMESTAMP", "interval": "INTERVAL", "time": "TIME"}.get(k, str(t))


def supertype(types: list[pa.DataType], operator: bool = False) -> pa.DataType | None:
    """The common type values of `types` are combined in (UNION, CASE, COALESCE, GREATEST,
    IN lists, VALUES), or with `operator` compared or computed in (=, <, +); None if there
    is none. They differ for REAL only, as in PostgreSQL: the common type of real and an
    integer or numeric is real (numeric casts to real implicitly), while `real = numeric`
    and `real + integer` resolve to double precision operators."""
    ts = [t for t in types if kind_of(t) != "null"]
    if not ts:
        return pa.null()
    first = ts[0]
    if all(t == first for t in ts):
        return first
    kinds = {kind_of(t) for t in ts}
    if kinds <= set(NUMERIC_KINDS):
        if "float" in kinds:
            if not operator and all(pa.types.is_float32(t) for t in ts if kind_of(t) == "float"):
                return pa.float32()
            return pa.float64()
        if "decimal" in kinds:
            decs = [int_as_decimal_type(t) if kind_of(t) == "int" else t for t in ts]
            int_digits = max(t.precision - t.scale for t in decs)
            scale = max(t.scale for t in decs)
            return cap_precision(int_digits + scale, scale)
        return max(ts, key=lambda t: t.bit_width)
    if kinds == {"string"}:
        return pa.large_string() if any(pa.types.is_large_string(t) for t in ts) else pa.string()
    if kinds <= {"date", "timestamp"}:
        if any(kind_of(t) == "timestamp" and t.tz for t in ts):
            return TIMESTAMPTZ         # timestamp and date read in the session's zone
        return next((t for t in ts if kind_of(t) == "timestamp"), TIMESTAMP)
    if kinds <= {"string", "binary"}:
        return pa.binary()
    return None


def null_of(t: pa.DataType) -> pa.Scalar:
    if isinstance(t, ArrayType):
        return pa.ExtensionScalar.from_storage(t, None)
    return pa.scalar(None, t)


def is_unknown_literal(node: exp.Expr) -> bool:
    """A bare string literal: PostgreSQL's "unknown" type, resolved from its context."""
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal) and node.is_string


def type_from_str(text: str) -> pa.DataType:
    """An Arrow type from its str() (ArrayType's serialized element type): the aliases
    pyarrow knows, plus the parameterised decimal128(p, s) / timestamp[unit] / date32[day]
    it does not."""
    m = re.fullmatch(r"decimal128\((\d+), (\d+)\)", text)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"timestamp\[(\w+)\]", text)
    if m:
        return pa.timestamp(m.group(1))
    return pa.type_for_alias({"date32[day]": "date32", "date64[ms]": "date64"}.get(text, text))


class ArrayType(pa.ExtensionType):
    """A one-dimensional SQL array of `value_type` (storage: its text form)."""

    def __init__(self, value_type: pa.DataType):
        self.value_type = value_type
        super().__init__(pa.string(), "kudusql.array")

    def __arrow_ext_serialize__(self) -> bytes:
        return str(self.value_type).encode()

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes
                                  ) -> ArrayType:
        return cls(type_from_str(serialized.decode()))

    def __reduce__(self):
        return ArrayType, (self.value_type,)

    def __hash__(self) -> int:
        return hash(("kudusql.array", str(self.value_type)))


# SQL type names sqlglot leaves as user-defined or object identifiers (`x::oid`,
# `x::pg_catalog.text`, `x::"char"`): reg* values are OIDs, vectors are arrays.
NAMED_TYPES: dict[str, pa.DataType] = {
    **dict.fromkeys(("text", "varchar", "character varying", "name", "char", "character",
                     "bpchar", "json", "jsonb", "pg_node_tree", "aclitem", "unknown",
                     "cstring", "uuid"), pa.string()),
    **dict.fromkeys(("int2", "smallint"), pa.int16()),
    **dict.fromkeys(("int4", "integer", "int"), pa.int32()),
    **dict.fromkeys(("int8", "bigint", "oid", "xid", "cid"), pa.int64()),
    # reg* values are OIDs that read and print as names: the catalog wrapper binds these
    # casts to its lookups (planner.binder.pg_functions host_call); what is left, e.g. the
    # type of a parameter cast to regclass, is the name
    **dict.fromkeys(("regclass", "regtype", "regproc", "regprocedure", "regnamespace",
                     "regrole", "regoper", "regoperator", "regconfig", "regdictionary",
                     "regcollation"), pa.string()),
    **dict.fromkeys(("float4", "real"), pa.float32()),
    **dict.fromkeys(("float8", "double precision"), pa.float64()),
    **dict.fromkeys(("bool", "boolean"), pa.bool_()),
    "numeric": DEFAULT_NUMERIC, "decimal": DEFAULT_NUMERIC, "date": pa.date32(),
    "timestamp": TIMESTAMP, "timestamptz": TIMESTAMPTZ, "bytea": pa.binary(), "interval": INTERVAL,
    "int2vector": ArrayType(pa.int16()), "oidvector": ArrayType(pa.int64()),
}


def named_type(name: str, node: exp.Expr) -> pa.DataType:
    n = name.strip().strip('"').lower()
    n = n.removeprefix("pg_catalog.")
    if n.endswith("[]"):
        return ArrayType(named_type(n[:-2], node))
    t = NAMED_TYPES.get(n)
    if t is None:
        raise UndefinedObject(f'type "{n}" does not exist', position=node_position(node))
    return t


def is_array(v: Value) -> bool:
    return isinstance(v.type, ArrayType)


def array_storage(v: Value) -> Value:
    """An array Value's text form (storage)."""
    if isinstance(v, pa.Scalar):
        return pa.scalar(v.value.as_py() if v.is_valid else None, pa.string())
    if isinstance(v, pa.ChunkedArray):
        return pa.chunked_array([c.storage for c in v.chunks], pa.string())
    return v.storage


def wrap_array(v: Value, t: ArrayType) -> Value:
    """Text Value -> array Value of type `t` (the text must be in canonical form)."""
    if isinstance(v, pa.Scalar):
        return pa.ExtensionScalar.from_storage(t, v.as_py())
    if isinstance(v, pa.ChunkedArray):
        return pa.chunked_array([pa.ExtensionArray.from_storage(t, c) for c in v.chunks], t)
    return pa.ExtensionArray.from_storage(t, v)
