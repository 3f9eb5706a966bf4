"""PostgreSQL type OIDs and the Arrow <-> OID mapping (the base of wire.pg_types).

The OID constants, `TYPES` (OID -> name, typlen), `ParamError` (a parameter or format
the wire cannot take, with its SQLSTATE), `type_oid` (an Arrow type -> (OID, typmod)),
`arrow_type_for` (the reverse), the RowDescription fields of a schema
(`field_descriptions`), the Bind's result format codes (`result_formats`) and `conform`
(a result cast to the types a RowDescription announced). The table of the mapping is in
wire/pg_types.py.
"""
from __future__ import annotations

import datetime as _dt
import functools
import uuid

import pyarrow as pa

from wire.protocol import FieldDescription


BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID = 16, 17, 18, 19, 20, 21, 23, 25, 26
JSON, FLOAT4, FLOAT8, UNKNOWN, BPCHAR, VARCHAR = 114, 700, 701, 705, 1042, 1043
DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC, UUID, JSONB = (
    1082, 1083, 1114, 1184, 1186, 1700, 2950, 3802)
VOID = 2278

# oid -> (type name, typlen)
TYPES: dict[int, tuple[str, int]] = {
    BOOL: ("bool", 1), BYTEA: ("bytea", -1), CHAR: ("char", 1), NAME: ("name", 64),
    INT8: ("int8", 8), INT2: ("int2", 2), INT4: ("int4", 4), TEXT: ("text", -1),
    OID: ("oid", 4), JSON: ("json", -1), FLOAT4: ("float4", 4), FLOAT8: ("float8", 8),
    UNKNOWN: ("unknown", -2), BPCHAR: ("bpchar", -1), VARCHAR: ("varchar", -1),
    DATE: ("date", 4), TIME: ("time", 8), TIMESTAMP: ("timestamp", 8),
    TIMESTAMPTZ: ("timestamptz", 8), INTERVAL: ("interval", 16), NUMERIC: ("numeric", -1),
    UUID: ("uuid", 16), JSONB: ("jsonb", -1), VOID: ("void", 4),
}

PG_EPOCH_DAYS = 10957                       # 2000-01-01 - 1970-01-01 in days
PG_EPOCH_US = PG_EPOCH_DAYS * 86400 * 10**6
_PG_EPOCH_DATE = _dt.date(2000, 1, 1)
_PG_EPOCH_DT = _dt.datetime(2000, 1, 1)
_UTC = _dt.UTC


class ParamError(Exception):
    """A parameter value that cannot be decoded (22P02 / 22P03 / 0A000)."""

    def __init__(self, message: str, sqlstate: str = "22P02"):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate


# element oid -> array oid
ARRAY_OF = {BOOL: 1000, BYTEA: 1001, CHAR: 1002, NAME: 1003, INT2: 1005, INT4: 1007,
            TEXT: 1009, VARCHAR: 1015, INT8: 1016, OID: 1028, FLOAT4: 1021, FLOAT8: 1022,
            TIMESTAMP: 1115, DATE: 1182, TIMESTAMPTZ: 1185, NUMERIC: 1231}
ELEMENT_OF = {a: e for e, a in ARRAY_OF.items()}


def _array_element(t: pa.DataType) -> pa.DataType | None:
    """The element type of a SQL array column (planner.expr.ArrayType: an extension type
    `kudusql.array` stored as PostgreSQL's array text form), else None."""
    if isinstance(t, pa.ExtensionType) and t.extension_name == "kudusql.array":
        return t.value_type
    return None


# -- Arrow -> OID -----------------------------------------------------------------------------
@functools.lru_cache(maxsize=512)
def type_oid(t: pa.DataType) -> tuple[int, int]:
    """(oid, typmod) a column of Arrow type `t` is described with (cached: asked for every
    column of every result)."""
    elem = _array_element(t)
    if elem is not None:
        return ARRAY_OF.get(type_oid(elem)[0], 1009), -1
    if pa.types.is_integer(t):
        if t.bit_width <= 16 and (pa.types.is_signed_integer(t) or t.bit_width == 8):
            return INT2, -1
        if t.bit_width <= 32 and (pa.types.is_signed_integer(t) or t.bit_width == 16):
            return INT4, -1
        if pa.types.is_signed_integer(t) or t.bit_width == 32:
            return INT8, -1
        return NUMERIC, -1
    if pa.types.is_float32(t):
        return FLOAT4, -1
    if pa.types.is_floating(t):
        return FLOAT8, -1
    if pa.types.is_decimal(t):
        return NUMERIC, ((t.precision << 16) | t.scale) + 4
    if pa.types.is_boolean(t):
        return BOOL, -1
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or \
            pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return BYTEA, -1
    if pa.types.is_date(t):
        return DATE, -1
    if pa.types.is_timestamp(t):
        return (TIMESTAMPTZ if t.tz else TIMESTAMP), -1
    if pa.types.is_time(t):
        return TIME, -1
    if pa.types.is_interval(t):
        return INTERVAL, -1
    return TEXT, -1


def arrow_type_for(oid: int, typmod: int = -1) -> pa.DataType | None:
    """The Arrow type values of `oid` decode to (None: keep whatever they are)."""
    match oid:
        case 16:
            return pa.bool_()
        case 17:
            return pa.binary()
        case 20 | 26:
            return pa.int64()
        case 21:
            return pa.int16()
        case 23:
            return pa.int32()
        case 700:
            return pa.float32()
        case 701:
            return pa.float64()
        case 1082:
            return pa.date32()
        case 1114:
            return pa.timestamp("us")
        case 1184:
            return pa.timestamp("us", tz="UTC")
        case 1700:
            if typmod >= 4:
                return pa.decimal128((typmod - 4) >> 16, (typmod - 4) & 0xFFFF)
            return None
        case 18 | 19 | 25 | 1042 | 1043 | 114 | 3802 | 2950 | 705:
            return pa.string()
    return None


def field_descriptions(schema: pa.Schema, formats: list[int] | None = None,
                       oids: list[tuple[int, int]] | None = None) -> list[FieldDescription]:
    """RowDescription fields of a result schema with per-column formats (0 text, 1 binary)."""
    out = []
    for i, f in enumerate(schema):
        oid, mod = oids[i] if oids is not None else type_oid(f.type)
        fmt = formats[i] if formats else 0
        out.append(FieldDescription(f.name, oid, TYPES.get(oid, ("", -1))[1], mod, fmt))
    return out


def result_formats(codes: tuple[int, ...] | list[int], ncols: int) -> list[int]:
    """Bind's result-format codes for `ncols` columns: none = all text, one = for all."""
    if not codes:
        return [0] * ncols
    if len(codes) == 1:
        return [codes[0]] * ncols
    if len(codes) != ncols:
        raise ParamError(f"bind message has {len(codes)} result formats but query has "
                         f"{ncols} columns", "08P01")
    return list(codes)


def conform(table: pa.Table | pa.RecordBatch, oids: list[tuple[int, int]]):
    """Cast the columns whose Arrow type would be described differently from the OIDs a
    client was already given (Describe before execution) to a type that matches them. A
    column whose values do not cast (a prepared statement's table dropped and created
    again with a column of another type: text where int4 was announced, a bigint beyond
    int4) is PostgreSQL's error for a result that no longer has the described type,
    0A000 `cached plan must not change result type`."""
    cols, changed = [], False
    for col, (oid, mod) in zip(table.columns, oids):
        if type_oid(col.type)[0] == oid:
            cols.append(col)
            continue
        target = arrow_type_for(oid, mod)
        if target is None:
            target = pa.decimal128(38, 10) if oid == NUMERIC else pa.string()
        try:
            cols.append(col.cast(target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise ParamError("cached plan must not change result type", "0A000") from None
        changed = True
    if not changed:
        return table
    if isinstance(table, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(cols, names=table.schema.names)
    return pa.Table.from_arrays(cols, names=table.column_names)
