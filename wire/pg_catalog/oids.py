"""Fixed OIDs, PostgreSQL's types and names: what every part of pg_catalog shares.

PostgreSQL 15's OIDs for the built-in objects (namespaces, the database, access methods,
collations, the catalog relations), `TYPES` (pg_type rows, `format_type`), the Kudu column
-> (type OID, typmod) mapping (`column_type`), identifier quoting and the SQL text of a
column default, and `derived_oid`: a user object's OID from its engine table id (see the
package docstring, wire/pg_catalog/__init__.py).
"""
from __future__ import annotations

import dataclasses
import hashlib
import re

from engine.schema import ColumnSchema
from engine.types import DataType


def version_string(server_version: str) -> str:
    """version(): 'PostgreSQL 15.6 (...) on ...' (SQLAlchemy parses "PostgreSQL 15.6")."""
    number, _, rest = server_version.partition(" ")
    return (f"PostgreSQL {number} {rest or '(kudusql)'} on x86_64-pc-linux-gnu, compiled by "
            "kudusql, 64-bit")

# -- fixed OIDs (PostgreSQL 15) --------------------------------------------------------------
BOOTSTRAP_SUPERUSER = 10
PG_CATALOG, PUBLIC, INFORMATION_SCHEMA = 11, 2200, 13000
NAMESPACES = {PG_CATALOG: "pg_catalog", PUBLIC: "public", INFORMATION_SCHEMA: "information_schema"}
DATABASE_OID = 5
HEAP_AM, BTREE_AM, HASH_AM = 2, 403, 405
DEFAULT_COLLATION, C_COLLATION, POSIX_COLLATION = 100, 950, 951
DEFAULT_TABLESPACE, GLOBAL_TABLESPACE = 1663, 1664
UTF8_ENCODING = 6
FIRST_USER_OID = 16384

# catalog relations with the OIDs PostgreSQL gives them (classoid values clients compare with)
SYSTEM_RELATION_OIDS = {
    "pg_type": 1247, "pg_attribute": 1249, "pg_proc": 1255, "pg_class": 1259,
    "pg_authid": 1260, "pg_auth_members": 1261, "pg_database": 1262, "pg_tablespace": 1213,
    "pg_attrdef": 2604, "pg_constraint": 2606, "pg_inherits": 2611, "pg_index": 2610,
    "pg_namespace": 2615, "pg_am": 2601, "pg_description": 2609, "pg_depend": 2608,
    "pg_trigger": 2620, "pg_collation": 3456, "pg_extension": 3079, "pg_enum": 3501,
    "pg_range": 3541, "pg_sequence": 2224, "pg_opclass": 2616, "pg_policy": 3256,
    "pg_statistic_ext": 3381, "pg_publication": 6104, "pg_publication_namespace": 6237,
    "pg_publication_rel": 6106, "pg_shdescription": 2396,
}


# -- types -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PgType:
    oid: int
    name: str                   # typname
    sql_name: str               # format_type's spelling
    length: int                 # typlen
    category: str               # typcategory
    array: int = 0              # typarray
    elem: int = 0               # typelem (for array types)
    typtype: str = "b"
    byval: bool = False
    align: str = "i"
    collation: int = 0

    @property
    def storage(self) -> str:
        return "p" if self.length > 0 else "x"


def _types() -> dict[int, PgType]:
    base = [  # oid, typname, format_type name, typlen, category, array oid, byval, align
        (16, "bool", "boolean", 1, "B", 1000, True, "c"),
        (17, "bytea", "bytea", -1, "U", 1001, False, "i"),
        (18, "char", '"char"', 1, "Z", 1002, True, "c"),
        (19, "name", "name", 64, "S", 1003, False, "c"),
        (20, "int8", "bigint", 8, "N", 1016, True, "d"),
        (21, "int2", "smallint", 2, "N", 1005, True, "s"),
        (22, "int2vector", "int2vector", -1, "A", 1006, False, "i"),
        (23, "int4", "integer", 4, "N", 1007, True, "i"),
        (24, "regproc", "regproc", 4, "N", 1008, True, "i"),
        (25, "text", "text", -1, "S", 1009, False, "i"),
        (26, "oid", "oid", 4, "N", 1028, True, "i"),
        (27, "tid", "tid", 6, "U", 1010, False, "s"),
        (28, "xid", "xid", 4, "U", 1011, True, "i"),
        (29, "cid", "cid", 4, "U", 1012, True, "i"),
        (30, "oidvector", "oidvector", -1, "A", 1013, False, "i"),
        (114, "json", "json", -1, "U", 199, False, "i"),
        (142, "xml", "xml", -1, "U", 143, False, "i"),
        (194, "pg_node_tree", "pg_node_tree", -1, "Z", 0, False, "i"),
        (700, "float4", "real", 4, "N", 1021, True, "i"),
        (701, "float8", "double precision", 8, "N", 1022, True, "d"),
        (705, "unknown", "unknown", -2, "X", 0, False, "c"),
        (790, "money", "money", 8, "N", 791, True, "d"),
        (1033, "aclitem", "aclitem", 12, "U", 1034, False, "i"),
        (1042, "bpchar", "character", -1, "S", 1014, False, "i"),
        (1043, "varchar", "character varying", -1, "S", 1015, False, "i"),
        (1082, "date", "date", 4, "D", 1182, True, "i"),
        (1083, "time", "time without time zone", 8, "D", 1183, True, "d"),
        (1114, "timestamp", "timestamp without time zone", 8, "D", 1115, True, "d"),
        (1184, "timestamptz", "timestamp with time zone", 8, "D", 1185, True, "d"),
        (1186, "interval", "interval", 16, "T", 1187, False, "d"),
        (1266, "timetz", "time with time zone", 12, "D", 1270, False, "d"),
        (1560, "bit", "bit", -1, "V", 1561, False, "i"),
        (1562, "varbit", "bit varying", -1, "V", 1563, False, "i"),
        (1700, "numeric", "numeric", -1, "N", 1231, False, "i"),
        (2202, "regprocedure", "regprocedure", 4, "N", 2207, True, "i"),
        (2203, "regoper", "regoper", 4, "N", 2208, True, "i"),
        (2204, "regoperator", "regoperator", 4, "N", 2209, True, "i"),
        (2205, "regclass", "regclass", 4, "N", 2210, True, "i"),
        (2206, "regtype", "regtype", 4, "N", 2211, True, "i"),
        (2249, "record", "record", -1, "P", 2287, False, "d"),
        (2275, "cstring", "cstring", -2, "P", 1263, False, "c"),
        (2276, "any", '"any"', 4, "P", 0, True, "i"),
        (2277, "anyarray", "anyarray", -1, "P", 0, False, "d"),
        (2278, "void", "void", 4, "P", 0, True, "i"),
        (2279, "trigger", "trigger", 4, "P", 0, True, "i"),
        (2283, "anyelement", "anyelement", 4, "P", 0, True, "i"),
        (2950, "uuid", "uuid", 16, "U", 2951, False, "c"),
        (3802, "jsonb", "jsonb", -1, "U", 3807, False, "i"),
        (4089, "regnamespace", "regnamespace", 4, "N", 4090, True, "i"),
        (4096, "regrole", "regrole", 4, "N", 4097, True, "i"),
    ]
    collatable = {18, 19, 25, 1042, 1043}
    out = {}
    for oid, name, sql, length, cat, arr, byval, align in base:
        out[oid] = PgType(oid, name, sql, length, cat, arr, 0, "p" if cat == "P" else "b",
                          byval, align, DEFAULT_COLLATION if oid in collatable else 0)
        if arr:
            out[arr] = PgType(arr, "_" + name, sql + "[]", -1, "A", 0, oid, "b", False,
                              "d" if align == "d" else "i",
                              DEFAULT_COLLATION if oid in collatable else 0)
    out[22] = dataclasses.replace(out[22], elem=21)
    out[30] = dataclasses.replace(out[30], elem=26)
    return out


TYPES: dict[int, PgType] = _types()
TYPE_BY_NAME: dict[str, int] = {t.name: t.oid for t in TYPES.values()}
TYPE_BY_NAME.update({t.sql_name.strip('"'): t.oid for t in TYPES.values()})
TYPE_BY_NAME.update({"int": 23, "integer": 23, "smallint": 21, "bigint": 20, "real": 700,
                     "float": 701, "double precision": 701, "boolean": 16, "decimal": 1700,
                     "character varying": 1043, "character": 1042, "char": 1042,
                     '"char"': 18, "timestamp without time zone": 1114,
                     "timestamp with time zone": 1184, "time without time zone": 1083})


def format_type(oid: int | None, typmod: int | None) -> str | None:
    """PostgreSQL's format_type(type oid, typmod)."""
    if oid is None:
        return None
    t = TYPES.get(oid)
    if t is None:
        return "???"
    if t.elem and t.category == "A" and t.name.startswith("_"):
        return format_type(t.elem, typmod) + "[]"
    mod = typmod if typmod is not None and typmod >= 0 else None
    if mod is None:
        return t.sql_name
    if oid == 1700 and mod >= 4:
        return f"numeric({(mod - 4) >> 16},{(mod - 4) & 0xFFFF})"
    if oid in (1043, 1042) and mod >= 4:
        return f"{t.sql_name}({mod - 4})"
    if oid in (1083, 1114, 1184, 1266):
        head, _, tail = t.sql_name.partition(" ")
        return f"{head}({mod}) {tail}".strip()
    return t.sql_name


# Kudu column type -> (type oid, typmod)
def column_type(c: ColumnSchema) -> tuple[int, int]:
    match c.type:
        case DataType.INT8 | DataType.INT16:
            return 21, -1
        case DataType.INT32:
            return 23, -1
        case DataType.INT64:
            return 20, -1
        case DataType.FLOAT:
            return 700, -1
        case DataType.DOUBLE:
            return 701, -1
        case DataType.DECIMAL:
            return 1700, ((c.precision << 16) | c.scale) + 4
        case DataType.VARCHAR:
            return 1043, c.length + 4
        case DataType.BINARY:
            return 17, -1
        case DataType.BOOL:
            return 16, -1
        case DataType.DATE:
            return 1082, -1
        case DataType.TIMESTAMP:
            return 1114, -1
    return 25, -1


# -- identifiers and literals ----------------------------------------------------------------
_RESERVED = frozenset((
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric",
    "authorization", "both", "case", "cast", "check", "collate", "column", "constraint",
    "create", "current_catalog", "current_date", "current_role", "current_time",
    "current_timestamp", "current_user", "default", "deferrable", "desc", "distinct", "do",
    "else", "end", "except", "false", "fetch", "for", "foreign", "from", "grant", "group",
    "having", "in", "initially", "intersect", "into", "lateral", "leading", "limit",
    "localtime", "localtimestamp", "not", "null", "offset", "on", "only", "or", "order",
    "placing", "primary", "references", "returning", "select", "session_user", "some",
    "symmetric", "table", "then", "to", "trailing", "true", "union", "unique", "user", "using",
    "variadic", "when", "where", "window", "with",
))


def quote_ident(name: str) -> str:
    """PostgreSQL's quote_ident: bare when lower case, not reserved, not starting with a
    digit; else double-quoted."""
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) and name not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def _sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def default_sql(c: ColumnSchema) -> str | None:
    """A column's DEFAULT as pg_get_expr shows it (`0`, `'x'::text`, `'-1'::integer`)."""
    v = c.default
    if v is None:
        return None
    typ = format_type(column_type(c)[0], -1)     # PostgreSQL casts to the bare type name
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)) or type(v).__name__ == "Decimal":
        text = str(v)
        if text.startswith("-") or text in ("inf", "-inf", "nan"):
            return f"{_sql_string(text)}::{typ}"
        return text
    if isinstance(v, (bytes, bytearray)):
        return f"{_sql_string(chr(92) + 'x' + bytes(v).hex())}::bytea"
    if hasattr(v, "isoformat"):
        return f"{_sql_string(str(v))}::{typ}"
    return f"{_sql_string(str(v))}::{typ}"


# -- OIDs of user objects --------------------------------------------------------------------
def derived_oid(kind: str, table_id: str) -> int:
    h = int.from_bytes(hashlib.blake2b(f"{kind}:{table_id}".encode(), digest_size=8).digest(),
                       "big")
    return FIRST_USER_OID + h % (2**31 - FIRST_USER_OID)


def split_qualified_name(text: str) -> list[str]:
    """`a."B".C` -> ["a", "B", "c"]: a dotted name split into its parts, unquoted ones folded
    to lower case."""
    parts, buf, quoted, i = [], [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            if quoted and i + 1 < len(text) and text[i + 1] == '"':
                buf.append('"')
                i += 1
            else:
                quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch if quoted else ch.lower())
        i += 1
    parts.append("".join(buf))
    return parts
