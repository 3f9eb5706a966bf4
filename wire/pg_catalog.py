"""pg_catalog and information_schema: PostgreSQL's system catalogs as views over the engine
catalog, so that psql, SQLAlchemy, pgcli, asyncpg and JDBC can introspect kudusql.

    session = db.session(catalog=PgCatalog(db.catalog, user="kudusql", database="kudusql"))

`PgCatalog` wraps the engine catalog (`engine.catalog.Catalog`) for one session. Name
resolution follows PostgreSQL's search_path with pg_catalog implicitly first:

    pg_catalog.pg_class   (the binder's `pg_catalog$pg_class`) -> the pg_class view
    pg_class              -> the pg_class view, even if a user table has that name
    information_schema.tables                                   -> the view
    tables, public.tables -> the user table (information_schema is not on the search path)

Everything else - user tables, DDL - is delegated to the engine catalog. A view is a
`SystemView` (`virtual = True`): `.schema` (an engine `Schema`; its first column is a nominal
key) and `.to_arrow(columns)`; the planner filters and joins its rows in the executor.

Views are built from metadata only (never table data), on demand, from a `_Snapshot` of the
engine catalog that is rebuilt when a DDL published new table metadata; a statement's views
therefore agree with each other. Rows are built by Python loops over tables and columns:
catalog metadata is small (tables x columns), never proportional to data.

OIDs. Built-in objects use PostgreSQL 15's OIDs (pg_catalog 11, public 2200, pg_class 1259,
int4 23, ...). A user table's OIDs are derived from its engine table id, which survives
renames and restarts:

    table oid        16384 + blake2b("table:" + id) mod (2^31 - 16384)
    primary key      "index:" (the pg_class index row and pg_index) and "constraint:"
    column default   "attrdef:<column id>:" + id

so an OID is the same in every statement and every session. Two ids hashing to one OID
(odds ~ n^2 / 2^32) are resolved by probing upwards in table-id order within a snapshot.

What is modelled. Each table is a relation (relkind 'r') with its columns in declared order
(attnum 1..n), NOT NULL and DEFAULT from the Kudu schema; its primary key is a unique btree
index `<table>_pkey` (relkind 'i', pg_index, pg_constraint 'p') - Kudu's primary key index
(rows sorted by key, a B-tree of keys per rowset), the only index there is, so `\\di` lists
exactly one per table; a table comment is its
pg_description. Kudu types map to int2 (INT8, INT16), int4, int8, float4, float8,
numeric(p,s), text (STRING), varchar(n), bytea, bool, date and timestamp. The system views
themselves are listed in pg_class / pg_attribute (pg_catalog ones as tables, the rest as
views), so `\\d pg_class` works. There are no foreign keys, sequences, triggers, policies,
inheritance, extensions or other schemas: those views exist with PostgreSQL's columns and
no rows. Columns of array types (indkey, conkey, proargtypes, ...) are Arrow lists.
pg_prepared_statements is session state, not catalog metadata: built on every read from
the connection's `prepared` callable (never cached in the snapshot).

Functions. Catalog functions are served here as `planner.expr.HostFunction`s that the
binder binds by name (`function(name)`): format_type, pg_get_expr, pg_get_indexdef,
pg_get_constraintdef, pg_get_userbyid, pg_table_is_visible, obj_description, ...,
version(), current_user, current_schema(s), current_setting / set_config, and the reg*
casts: `'t'::regclass` is the table's OID (42P01 for an unknown name), `x::regclass::text`
its name (`regclassout`); likewise regtype, regnamespace, regrole and regproc. Set-returning
catalog functions (pg_partition_ancestors) return arrays that the binder unnests.

Not modelled: privileges (every has_*_privilege is true), pg_stat_*, column comments,
row types of tables (reltype is 0), int2vector / oidvector lower bound 0 (read as 1).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from engine.schema import ColumnSchema, Schema
from engine.types import DataType
from planner.ddl import declared_columns
from planner.errors import SqlError, UndefinedObject
from planner.expr import ArrayType, HostFunction, array_to_list, list_to_array
from wire.settings import SERVER_VERSION, SERVER_VERSION_NUM

Value = pa.Scalar | pa.Array | pa.ChunkedArray

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


@dataclasses.dataclass
class _TableInfo:
    """One user table as PostgreSQL sees it."""
    meta: Any                               # engine TableMetadata
    oid: int
    index_oid: int
    constraint_oid: int
    columns: list[ColumnSchema]             # declared order: attnum = position + 1
    attrdef_oids: dict[int, int]            # attnum -> pg_attrdef oid

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def key_attnums(self) -> list[int]:
        pos = {c.name: i + 1 for i, c in enumerate(self.columns)}
        return [pos[k] for k in self.meta.schema.key_names]


@dataclasses.dataclass
class _Relation:
    """A row of pg_class."""
    oid: int
    name: str
    namespace: int
    kind: str                               # r, v, i
    natts: int
    am: int = 0
    has_index: bool = False


class _Snapshot:
    """The user tables of one catalog state, with their OIDs, and the views built from them
    (each built once, on first use)."""

    def __init__(self, metas: list[Any]):
        self.metas = metas
        self.tables: list[_TableInfo] = []
        taken: set[int] = set(_SYSTEM_OIDS)

        def claim(kind: str, tid: str) -> int:
            oid = derived_oid(kind, tid)
            while oid in taken:
                oid = oid + 1 if oid + 1 < 2**31 else FIRST_USER_OID
            taken.add(oid)
            return oid

        for m in sorted(metas, key=lambda m: m.id):
            order = declared_columns(_MetaTable(m))
            cols = [m.schema.column(n) for n in order]
            oid = claim("table", m.id)
            info = _TableInfo(m, oid, claim("index", m.id), claim("constraint", m.id), cols,
                              {})
            for i, c in enumerate(cols):
                if c.default is not None:
                    info.attrdef_oids[i + 1] = claim(f"attrdef:{c.id}", m.id)
            self.tables.append(info)
        self.tables.sort(key=lambda t: t.name)
        self.by_oid = {t.oid: t for t in self.tables}
        self.by_name = {t.name: t for t in self.tables}
        self.index_by_oid = {t.index_oid: t for t in self.tables}
        self.constraint_by_oid = {t.constraint_oid: t for t in self.tables}
        self.views: dict[str, pa.Table] = {}
        self.lock = threading.Lock()

    def relations(self) -> list[_Relation]:
        out = [_Relation(v.oid, v.name, v.namespace, v.relkind, len(v.columns))
               for v in VIEWS.values()]
        for t in self.tables:
            out.append(_Relation(t.oid, t.name, PUBLIC, "r", len(t.columns), HEAP_AM, True))
            out.append(_Relation(t.index_oid, f"{t.name}_pkey", PUBLIC, "i",
                                 len(t.key_attnums), BTREE_AM))
        return out

    def relation(self, oid: int) -> _Relation | None:
        v = _VIEW_BY_OID.get(oid)
        if v is not None:
            return _Relation(v.oid, v.name, v.namespace, v.relkind, len(v.columns))
        t = self.by_oid.get(oid)
        if t is not None:
            return _Relation(t.oid, t.name, PUBLIC, "r", len(t.columns), HEAP_AM, True)
        t = self.index_by_oid.get(oid)
        if t is not None:
            return _Relation(t.index_oid, f"{t.name}_pkey", PUBLIC, "i", len(t.key_attnums),
                             BTREE_AM)
        return None


class _MetaTable:
    """Adapts TableMetadata to what planner.ddl.declared_columns reads."""

    def __init__(self, meta: Any):
        self.schema = meta.schema
        self.metadata = meta


# -- views -----------------------------------------------------------------------------------
# pg type name of a view column -> (Kudu type of its nominal ColumnSchema, Arrow type)
_COLUMN_TYPES: dict[str, tuple[DataType, pa.DataType]] = {
    **dict.fromkeys(("oid", "regproc", "xid", "int8", "regclass", "regtype"),
                    (DataType.INT64, pa.int64())),
    "int4": (DataType.INT32, pa.int32()), "int2": (DataType.INT16, pa.int16()),
    "float4": (DataType.FLOAT, pa.float32()), "float8": (DataType.DOUBLE, pa.float64()),
    "bool": (DataType.BOOL, pa.bool_()), "timestamptz": (DataType.TIMESTAMP, pa.timestamp("us")),
    **dict.fromkeys(("name", "text", "char", "pg_node_tree", "aclitem", "varchar"),
                    (DataType.STRING, pa.string())),
    **dict.fromkeys(("int2vector", "int2[]"), (DataType.STRING, ArrayType(pa.int16()))),
    **dict.fromkeys(("oidvector", "oid[]", "regtype[]"), (DataType.STRING, ArrayType(pa.int64()))),
    **dict.fromkeys(("text[]", "name[]", "char[]", "aclitem[]"),
                    (DataType.STRING, ArrayType(pa.string()))),
    "float4[]": (DataType.STRING, ArrayType(pa.float32())),
}


@dataclasses.dataclass(frozen=True)
class _ViewColumn(ColumnSchema):
    """A view column: its Arrow type may be one no Kudu column has (lists)."""
    arrow: Any = None

    @property
    def arrow_type(self) -> pa.DataType:
        return self.arrow


@dataclasses.dataclass(frozen=True)
class _ViewDef:
    name: str
    namespace: int
    columns: tuple[tuple[str, str], ...]            # (column, pg type name)
    rows: Callable[[PgCatalog, _Snapshot], Iterable[dict]]
    relkind: str = "r"
    oid: int = 0

    @property
    def qualified(self) -> str:
        return f"{NAMESPACES[self.namespace]}${self.name}"


VIEWS: dict[str, _ViewDef] = {}       # qualified name (`pg_catalog$pg_class`) -> definition


def _view(namespace: int, name: str, columns: str, relkind: str = "r"):
    """Register a view: `columns` is "name type, name type, ..."; the decorated function
    yields one dict per row (missing columns are NULL)."""
    cols = tuple(tuple(c.strip().rsplit(" ", 1)) for c in columns.split(",") if c.strip())

    def register(fn):
        v = _ViewDef(name, namespace, cols, fn, relkind)
        VIEWS[v.qualified] = v
        return fn
    return register


class SystemView:
    """One system view of one catalog snapshot: what the planner scans (`virtual`)."""

    virtual = True

    def __init__(self, owner: PgCatalog, view: _ViewDef):
        self._owner = owner
        self._view = view
        self.name = view.qualified
        self.schema = _view_schema(view)

    def to_arrow(self, columns: list[str]) -> pa.Table:
        return self._owner._view_table(self._view).select(columns)

    def _refuse(self, *args, **kwargs):
        raise SqlError(f'cannot change system view "{self._view.name}"', "42809")

    insert = upsert = update = delete = write = scan = diff_scan = _refuse

    def __repr__(self) -> str:
        return f"SystemView({self.name})"


_SCHEMAS: dict[str, Schema] = {}


def _view_schema(view: _ViewDef) -> Schema:
    s = _SCHEMAS.get(view.qualified)
    if s is None:
        cols = []
        for name, typ in view.columns:
            dtype, arrow = _COLUMN_TYPES[typ]
            cols.append(_ViewColumn(name, dtype, arrow=arrow))
        s = _SCHEMAS[view.qualified] = Schema(cols, key=[cols[0].name])
    return s


# -- the wrapper -----------------------------------------------------------------------------
class PgCatalog:
    """The engine catalog plus pg_catalog / information_schema for one session."""

    def __init__(self, catalog: Any, *, user: str = "kudusql", database: str = "kudusql",
                 settings: Any = None, pid: int = 0, prepared: Any = None):
        self._catalog = catalog
        # () -> rows of pg_prepared_statements (the connection's named statements)
        self.prepared = prepared if prepared is not None else (lambda: [])
        self.user = user
        self.database = database
        self.settings = settings if settings is not None else _LocalSettings()
        self.pid = pid
        self.version = version_string(self.settings.get("server_version") or SERVER_VERSION)
        self._snapshot: _Snapshot | None = None
        self._lock = threading.Lock()
        self._functions = _host_functions(self)

    # -- delegation and name resolution ----------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)

    @staticmethod
    def _view_name(name: str) -> str | None:
        """The view a table name means: `pg_catalog$x` / `information_schema$x` / bare x
        (pg_catalog first on the search path)."""
        if name in VIEWS:
            return name
        if "$" not in name and f"pg_catalog${name}" in VIEWS:
            return f"pg_catalog${name}"
        return None

    def has_table(self, name: str) -> bool:
        return self._view_name(name) is not None or self._catalog.has_table(name)

    def table(self, name: str) -> Any:
        v = self._view_name(name)
        if v is not None:
            return SystemView(self, VIEWS[v])
        return self._catalog.table(name)

    # DDL on a system view is refused; on a user table it goes to the engine catalog
    def _check_writable(self, name: str) -> None:
        if self._view_name(name) is not None and not self._catalog.has_table(name):
            view = name.split("$")[-1]
            raise SqlError(f'permission denied: "{view}" is a system catalog', "42501")

    def _ddl(method: str):
        def call(self, name, *args, **kwargs):
            self._check_writable(name)
            return getattr(self._catalog, method)(name, *args, **kwargs)
        call.__name__ = method
        return call

    drop_table = _ddl("drop_table")
    rename_table = _ddl("rename_table")
    add_column = _ddl("add_column")
    drop_column = _ddl("drop_column")
    rename_column = _ddl("rename_column")
    set_properties = _ddl("set_properties")
    add_range_partition = _ddl("add_range_partition")
    drop_range_partition = _ddl("drop_range_partition")
    del _ddl

    def function(self, name: str) -> HostFunction | None:
        """The catalog function called `name` (lower case, without a schema), if any."""
        return self._functions.get(name)

    # -- snapshots -------------------------------------------------------------------------
    def snapshot(self) -> _Snapshot:
        metas = [self._catalog.get_table(n) for n in self._catalog.list_tables()]
        with self._lock:
            s = self._snapshot
            if s is None or len(s.metas) != len(metas) or any(
                    a is not b for a, b in zip(s.metas, metas)):
                s = self._snapshot = _Snapshot(metas)
            return s

    def _view_table(self, view: _ViewDef) -> pa.Table:
        snap = self.snapshot()
        if view.qualified in _SESSION_VIEWS:        # session state: never cached
            return _build(view, view.rows(self, snap))
        with snap.lock:
            t = snap.views.get(view.qualified)
            if t is None:
                t = snap.views[view.qualified] = _build(view, view.rows(self, snap))
            return t

    # -- lookups used by the functions ------------------------------------------------------
    def regclass(self, name: str) -> int:
        """A relation name (optionally schema-qualified and quoted) or numeric OID -> OID."""
        text = name.strip()
        if re.fullmatch(r"\d+", text):
            return int(text)
        parts = _split_qualified(text)
        schema, rel = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[-1])
        snap = self.snapshot()
        if schema in (None, "pg_catalog", "information_schema"):
            ns = schema or "pg_catalog"
            v = VIEWS.get(f"{ns}${rel}")
            if v is not None:
                return v.oid
        if schema in (None, "public"):
            t = snap.by_name.get(rel)
            if t is not None:
                return t.oid
            if rel.endswith("_pkey") and rel[:-5] in snap.by_name:
                return snap.by_name[rel[:-5]].index_oid
        raise SqlError(f'relation "{text}" does not exist', "42P01")

    def relation_name(self, oid: int) -> str:
        """regclass output: the name, schema-qualified when not on the search path."""
        r = self.snapshot().relation(oid)
        if r is None:
            return str(oid)
        name = quote_ident(r.name)
        return name if r.namespace in (PG_CATALOG, PUBLIC) else \
            f"{NAMESPACES[r.namespace]}.{name}"


class _LocalSettings:
    """Settings of a session without a wire connection: set_config / current_setting."""

    def __init__(self):
        self._values: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        v = self._values.get(name.lower())
        if v is None:
            v = next((d for k, d in _SETTINGS.items() if k.lower() == name.lower()), None)
        return v

    def set(self, name: str, value: str) -> None:
        self._values[name.lower()] = value


def _split_qualified(text: str) -> list[str]:
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


def _build(view: _ViewDef, rows: Iterable[dict]) -> pa.Table:
    rows = list(rows)
    types = [_COLUMN_TYPES[t][1] for _, t in view.columns]
    return pa.Table.from_arrays(
        [_array([r.get(name) for r in rows], typ) for (name, _), typ in zip(view.columns, types)],
        schema=pa.schema([pa.field(name, typ) for (name, _), typ in zip(view.columns, types)]))


def _array(values: list, typ: pa.DataType) -> pa.Array:
    """Python values -> an Arrow array of `typ` (SQL arrays from Python lists)."""
    if isinstance(typ, ArrayType):
        return list_to_array(pa.array(values, pa.list_(typ.value_type)))
    return pa.array(values, typ)


def _scalar(value: Any, typ: pa.DataType) -> pa.Scalar:
    if isinstance(typ, ArrayType):
        return list_to_array(pa.scalar(value, pa.list_(typ.value_type)))
    return pa.scalar(value, typ)


# -- pg_catalog views ------------------------------------------------------------------------
@_view(PG_CATALOG, "pg_namespace", "oid oid, nspname name, nspowner oid, nspacl aclitem[]")
def _pg_namespace(cat: PgCatalog, snap: _Snapshot):
    for oid, name in NAMESPACES.items():
        yield {"oid": oid, "nspname": name, "nspowner": BOOTSTRAP_SUPERUSER}


@_view(PG_CATALOG, "pg_class", """oid oid, relname name, relnamespace oid, reltype oid,
    reloftype oid, relowner oid, relam oid, relfilenode oid, reltablespace oid, relpages int4,
    reltuples float4, relallvisible int4, reltoastrelid oid, relhasindex bool, relisshared bool,
    relpersistence char, relkind char, relnatts int2, relchecks int2, relhasrules bool,
    relhastriggers bool, relhassubclass bool, relrowsecurity bool, relforcerowsecurity bool,
    relispopulated bool, relreplident char, relispartition bool, relrewrite oid,
    relfrozenxid xid, relminmxid xid, relacl aclitem[], reloptions text[],
    relpartbound pg_node_tree""")
def _pg_class(cat: PgCatalog, snap: _Snapshot):
    for r in snap.relations():
        yield {"oid": r.oid, "relname": r.name, "relnamespace": r.namespace, "reltype": 0,
               "reloftype": 0, "relowner": BOOTSTRAP_SUPERUSER, "relam": r.am,
               "relfilenode": r.oid if r.kind != "v" else 0, "reltablespace": 0,
               "relpages": 0, "reltuples": -1.0, "relallvisible": 0, "reltoastrelid": 0,
               "relhasindex": r.has_index, "relisshared": False, "relpersistence": "p",
               "relkind": r.kind, "relnatts": r.natts, "relchecks": 0, "relhasrules": False,
               "relhastriggers": False, "relhassubclass": False, "relrowsecurity": False,
               "relforcerowsecurity": False, "relispopulated": True,
               "relreplident": "n" if r.kind in ("v", "i") else "d", "relispartition": False,
               "relrewrite": 0, "relfrozenxid": 0, "relminmxid": 0}


def _attribute(relid: int, attnum: int, name: str, typid: int, typmod: int, notnull: bool,
               hasdef: bool) -> dict:
    t = TYPES[typid]
    return {"attrelid": relid, "attname": name, "atttypid": typid, "attstattarget": -1,
            "attlen": t.length, "attnum": attnum, "attndims": 1 if t.category == "A" else 0,
            "attcacheoff": -1, "atttypmod": typmod, "attbyval": t.byval, "attalign": t.align,
            "attstorage": t.storage, "attcompression": "", "attnotnull": notnull,
            "atthasdef": hasdef, "atthasmissing": False, "attidentity": "",
            "attgenerated": "", "attisdropped": False, "attislocal": True, "attinhcount": 0,
            "attcollation": t.collation}


_VIEW_COLUMN_OIDS = {"oid": 26, "regproc": 24, "xid": 28, "int8": 20, "int4": 23, "int2": 21,
                     "float4": 700, "float8": 701, "bool": 16, "timestamptz": 1184,
                     "name": 19, "text": 25, "char": 18, "pg_node_tree": 194, "aclitem": 1033,
                     "varchar": 1043, "int2vector": 22, "oidvector": 30, "int2[]": 1005,
                     "oid[]": 1028, "regtype[]": 2211, "text[]": 1009, "name[]": 1003,
                     "char[]": 1002, "aclitem[]": 1034, "float4[]": 1021, "regclass": 2205,
                     "regtype": 2206}


@_view(PG_CATALOG, "pg_attribute", """attrelid oid, attname name, atttypid oid,
    attstattarget int4, attlen int2, attnum int2, attndims int4, attcacheoff int4,
    atttypmod int4, attbyval bool, attalign char, attstorage char, attcompression char,
    attnotnull bool, atthasdef bool, atthasmissing bool, attidentity char, attgenerated char,
    attisdropped bool, attislocal bool, attinhcount int4, attcollation oid, attacl aclitem[],
    attoptions text[], attfdwoptions text[], attmissingval text""")
def _pg_attribute(cat: PgCatalog, snap: _Snapshot):
    for v in VIEWS.values():
        for i, (name, typ) in enumerate(v.columns):
            yield _attribute(v.oid, i + 1, name, _VIEW_COLUMN_OIDS[typ], -1, False, False)
    for t in snap.tables:
        for i, c in enumerate(t.columns):
            typid, typmod = column_type(c)
            yield _attribute(t.oid, i + 1, c.name, typid, typmod, not c.nullable,
                             c.default is not None)
        for i, attnum in enumerate(t.key_attnums):
            c = t.columns[attnum - 1]
            typid, typmod = column_type(c)
            yield _attribute(t.index_oid, i + 1, c.name, typid, typmod, False, False)


@_view(PG_CATALOG, "pg_type", """oid oid, typname name, typnamespace oid, typowner oid,
    typlen int2, typbyval bool, typtype char, typcategory char, typispreferred bool,
    typisdefined bool, typdelim char, typrelid oid, typsubscript regproc, typelem oid,
    typarray oid, typinput regproc, typoutput regproc, typreceive regproc, typsend regproc,
    typmodin regproc, typmodout regproc, typanalyze regproc, typalign char, typstorage char,
    typnotnull bool, typbasetype oid, typtypmod int4, typndims int4, typcollation oid,
    typdefaultbin pg_node_tree, typdefault text, typacl aclitem[]""")
def _pg_type(cat: PgCatalog, snap: _Snapshot):
    for t in sorted(TYPES.values(), key=lambda t: t.oid):
        yield {"oid": t.oid, "typname": t.name, "typnamespace": PG_CATALOG,
               "typowner": BOOTSTRAP_SUPERUSER, "typlen": t.length, "typbyval": t.byval,
               "typtype": t.typtype, "typcategory": t.category,
               "typispreferred": t.oid in (16, 25, 701, 1184, 1186, 2205),
               "typisdefined": True, "typdelim": ",", "typrelid": 0, "typsubscript": 0,
               "typelem": t.elem, "typarray": t.array, "typinput": 0, "typoutput": 0,
               "typreceive": 0, "typsend": 0, "typmodin": 0, "typmodout": 0,
               "typanalyze": 0, "typalign": t.align, "typstorage": t.storage,
               "typnotnull": False, "typbasetype": 0, "typtypmod": -1, "typndims": 0,
               "typcollation": t.collation}


@_view(PG_CATALOG, "pg_index", """indexrelid oid, indrelid oid, indnatts int2,
    indnkeyatts int2, indisunique bool, indnullsnotdistinct bool, indisprimary bool,
    indisexclusion bool, indimmediate bool, indisclustered bool, indisvalid bool,
    indcheckxmin bool, indisready bool, indislive bool, indisreplident bool,
    indkey int2vector, indcollation oidvector, indclass oidvector, indoption int2vector,
    indexprs pg_node_tree, indpred pg_node_tree""")
def _pg_index(cat: PgCatalog, snap: _Snapshot):
    for t in snap.tables:
        keys = t.key_attnums
        cols = [t.columns[k - 1] for k in keys]
        yield {"indexrelid": t.index_oid, "indrelid": t.oid, "indnatts": len(keys),
               "indnkeyatts": len(keys), "indisunique": True, "indnullsnotdistinct": False,
               "indisprimary": True, "indisexclusion": False, "indimmediate": True,
               "indisclustered": False, "indisvalid": True, "indcheckxmin": False,
               "indisready": True, "indislive": True, "indisreplident": False,
               "indkey": keys,
               "indcollation": [TYPES[column_type(c)[0]].collation for c in cols],
               "indclass": [_OPCLASS.get(column_type(c)[0], 0) for c in cols],
               "indoption": [0] * len(keys)}


# btree operator classes of the key types (pg_opclass oids)
_OPCLASS = {21: 1979, 23: 1978, 20: 1980, 25: 3126, 1043: 3126, 17: 421, 1082: 3122,
            1114: 3128, 1700: 3125, 16: 424, 700: 1970, 701: 1971}


@_view(PG_CATALOG, "pg_constraint", """oid oid, conname name, connamespace oid, contype char,
    condeferrable bool, condeferred bool, convalidated bool, conrelid oid, contypid oid,
    conindid oid, conparentid oid, confrelid oid, confupdtype char, confdeltype char,
    confmatchtype char, conislocal bool, coninhcount int4, connoinherit bool, conkey int2[],
    confkey int2[], conpfeqop oid[], conppeqop oid[], conffeqop oid[], confdelsetcols int2[],
    conexclop oid[], conbin pg_node_tree""")
def _pg_constraint(cat: PgCatalog, snap: _Snapshot):
    for t in snap.tables:
        yield {"oid": t.constraint_oid, "conname": f"{t.name}_pkey", "connamespace": PUBLIC,
               "contype": "p", "condeferrable": False, "condeferred": False,
               "convalidated": True, "conrelid": t.oid, "contypid": 0,
               "conindid": t.index_oid, "conparentid": 0, "confrelid": 0,
               "confupdtype": " ", "confdeltype": " ", "confmatchtype": " ",
               "conislocal": True, "coninhcount": 0, "connoinherit": True,
               "conkey": t.key_attnums}


@_view(PG_CATALOG, "pg_attrdef", "oid oid, adrelid oid, adnum int2, adbin pg_node_tree")
def _pg_attrdef(cat: PgCatalog, snap: _Snapshot):
    # adbin holds the expression's SQL text: pg_get_expr(adbin, relid) returns it as is
    for t in snap.tables:
        for attnum, oid in sorted(t.attrdef_oids.items()):
            yield {"oid": oid, "adrelid": t.oid, "adnum": attnum,
                   "adbin": default_sql(t.columns[attnum - 1])}


@_view(PG_CATALOG, "pg_description", "objoid oid, classoid oid, objsubid int4, description text")
def _pg_description(cat: PgCatalog, snap: _Snapshot):
    yield {"objoid": PUBLIC, "classoid": SYSTEM_RELATION_OIDS["pg_namespace"], "objsubid": 0,
           "description": "standard public schema"}
    for t in snap.tables:
        if t.meta.comment:
            yield {"objoid": t.oid, "classoid": SYSTEM_RELATION_OIDS["pg_class"],
                   "objsubid": 0, "description": t.meta.comment}


@_view(PG_CATALOG, "pg_shdescription", "objoid oid, classoid oid, description text")
def _pg_shdescription(cat: PgCatalog, snap: _Snapshot):
    return ()


@_view(PG_CATALOG, "pg_database", """oid oid, datname name, datdba oid, encoding int4,
    datlocprovider char, datistemplate bool, datallowconn bool, datconnlimit int4,
    datfrozenxid xid, datminmxid xid, dattablespace oid, datcollate text, datctype text,
    daticulocale text, datcollversion text, datacl aclitem[]""")
def _pg_database(cat: PgCatalog, snap: _Snapshot):
    yield {"oid": DATABASE_OID, "datname": cat.database, "datdba": BOOTSTRAP_SUPERUSER,
           "encoding": UTF8_ENCODING, "datlocprovider": "c", "datistemplate": False,
           "datallowconn": True, "datconnlimit": -1, "datfrozenxid": 0, "datminmxid": 1,
           "dattablespace": DEFAULT_TABLESPACE, "datcollate": "C.UTF-8",
           "datctype": "C.UTF-8"}


_ROLE_COLUMNS = """rolname name, rolsuper bool, rolinherit bool, rolcreaterole bool,
    rolcreatedb bool, rolcanlogin bool, rolreplication bool, rolconnlimit int4,
    rolpassword text, rolvaliduntil timestamptz, rolbypassrls bool, rolconfig text[], oid oid"""


def _role(cat: PgCatalog) -> dict:
    return {"oid": BOOTSTRAP_SUPERUSER, "rolname": cat.user, "rolsuper": True,
            "rolinherit": True, "rolcreaterole": True, "rolcreatedb": True,
            "rolcanlogin": True, "rolreplication": True, "rolconnlimit": -1,
            "rolpassword": "********", "rolbypassrls": True}


@_view(PG_CATALOG, "pg_roles", _ROLE_COLUMNS, relkind="v")
def _pg_roles(cat: PgCatalog, snap: _Snapshot):
    yield _role(cat)


@_view(PG_CATALOG, "pg_authid", "oid oid, " + _ROLE_COLUMNS.rsplit(",", 1)[0])
def _pg_authid(cat: PgCatalog, snap: _Snapshot):
    yield {**_role(cat), "rolpassword": None}


@_view(PG_CATALOG, "pg_user", """usename name, usesysid oid, usecreatedb bool, usesuper bool,
    userepl bool, usebypassrls bool, passwd text, valuntil timestamptz, useconfig text[]""",
       relkind="v")
def _pg_user(cat: PgCatalog, snap: _Snapshot):
    yield {"usename": cat.user, "usesysid": BOOTSTRAP_SUPERUSER, "usecreatedb": True,
           "usesuper": True, "userepl": True, "usebypassrls": True, "passwd": "********"}


@_view(PG_CATALOG, "pg_auth_members", "roleid oid, member oid, grantor oid, admin_option bool")
def _pg_auth_members(cat: PgCatalog, snap: _Snapshot):
    return ()


@_view(PG_CATALOG, "pg_am", "oid oid, amname name, amhandler regproc, amtype char")
def _pg_am(cat: PgCatalog, snap: _Snapshot):
    for oid, name, kind in ((HEAP_AM, "heap", "t"), (BTREE_AM, "btree", "i"),
                            (HASH_AM, "hash", "i")):
        yield {"oid": oid, "amname": name, "amhandler": 0, "amtype": kind}


@_view(PG_CATALOG, "pg_tablespace", """oid oid, spcname name, spcowner oid, spcacl aclitem[],
    spcoptions text[]""")
def _pg_tablespace(cat: PgCatalog, snap: _Snapshot):
    for oid, name in ((DEFAULT_TABLESPACE, "pg_default"), (GLOBAL_TABLESPACE, "pg_global")):
        yield {"oid": oid, "spcname": name, "spcowner": BOOTSTRAP_SUPERUSER}


@_view(PG_CATALOG, "pg_collation", """oid oid, collname name, collnamespace oid,
    collowner oid, collprovider char, collisdeterministic bool, collencoding int4,
    collcollate text, collctype text, colliculocale text, collversion text""")
def _pg_collation(cat: PgCatalog, snap: _Snapshot):
    for oid, name, prov, enc, coll in ((DEFAULT_COLLATION, "default", "d", -1, None),
                                       (C_COLLATION, "C", "c", -1, "C"),
                                       (POSIX_COLLATION, "POSIX", "c", -1, "POSIX")):
        yield {"oid": oid, "collname": name, "collnamespace": PG_CATALOG,
               "collowner": BOOTSTRAP_SUPERUSER, "collprovider": prov,
               "collisdeterministic": True, "collencoding": enc, "collcollate": coll,
               "collctype": coll}


@_view(PG_CATALOG, "pg_settings", """name text, setting text, unit text, category text,
    short_desc text, extra_desc text, context text, vartype text, source text, min_val text,
    max_val text, enumvals text[], boot_val text, reset_val text, sourcefile text,
    sourceline int4, pending_restart bool""", relkind="v")
def _pg_settings(cat: PgCatalog, snap: _Snapshot):
    for name, default in sorted(_SETTINGS.items(), key=lambda kv: kv[0].lower()):
        value = cat.settings.get(name)
        value = default if value is None else value
        vartype = "integer" if re.fullmatch(r"-?\d+", default) else \
            "bool" if default in ("on", "off") else "string"
        yield {"name": name, "setting": value, "category": "Ungrouped", "context": "user",
               "unit": "ms" if name in ("statement_timeout", "lock_timeout",
                                        "idle_in_transaction_session_timeout") else None,
               "vartype": vartype, "source": "default", "boot_val": default,
               "reset_val": default, "pending_restart": False, "short_desc": ""}


@_view(PG_CATALOG, "pg_prepared_statements", """name text, statement text,
    prepare_time timestamptz, parameter_types text[], from_sql bool, generic_plans int8,
    custom_plans int8""", relkind="v")
def _pg_prepared_statements(cat: PgCatalog, snap: _Snapshot):
    """SQL-level PREPAREs (from_sql) and the extended protocol's named statements; the
    parameter types are their names (PostgreSQL's regtype[] prints the same)."""
    yield from cat.prepared()


_SESSION_VIEWS = {"pg_catalog$pg_prepared_statements"}


_SETTINGS = {
    "application_name": "", "block_size": "8192", "bytea_output": "hex",
    "client_encoding": "UTF8", "DateStyle": "ISO, MDY",
    "default_transaction_isolation": "read committed", "default_transaction_read_only": "off",
    "extra_float_digits": "1", "integer_datetimes": "on", "IntervalStyle": "postgres",
    "is_superuser": "on", "jit": "off", "lc_collate": "C.UTF-8", "lc_ctype": "C.UTF-8",
    "max_identifier_length": "63", "max_index_keys": "32", "search_path": '"$user", public',
    "server_encoding": "UTF8", "server_version": SERVER_VERSION,
    "server_version_num": SERVER_VERSION_NUM, "standard_conforming_strings": "on",
    "statement_timeout": "0", "TimeZone": "UTC", "transaction_isolation": "read committed",
    "transaction_read_only": "off",
}


@_view(PG_CATALOG, "pg_proc", """oid oid, proname name, pronamespace oid, proowner oid,
    prolang oid, procost float4, prorows float4, provariadic oid, prosupport regproc,
    prokind char, prosecdef bool, proleakproof bool, proisstrict bool, proretset bool,
    provolatile char, proparallel char, pronargs int2, pronargdefaults int2, prorettype oid,
    proargtypes oidvector, proallargtypes oid[], proargmodes char[], proargnames text[],
    proargdefaults pg_node_tree, protrftypes oid[], prosrc text, probin text,
    prosqlbody pg_node_tree, proconfig text[], proacl aclitem[]""")
def _pg_proc(cat: PgCatalog, snap: _Snapshot):
    # a few built-ins, enough for completion lists; catalog functions are not listed
    for oid, name, kind, ret, args, retset in (
            (1, "version", "f", 25, [], False), (2, "now", "f", 1184, [], False),
            (3, "count", "a", 20, [2276], False), (4, "sum", "a", 1700, [1700], False),
            (5, "avg", "a", 1700, [1700], False), (6, "min", "a", 2283, [2283], False),
            (7, "max", "a", 2283, [2283], False), (8, "lower", "f", 25, [25], False),
            (9, "upper", "f", 25, [25], False), (10, "length", "f", 23, [25], False),
            (11, "coalesce", "f", 2283, [2283], False), (12, "abs", "f", 1700, [1700], False),
            (13, "round", "f", 1700, [1700, 23], False),
            (14, "generate_series", "f", 20, [20, 20], True),
            (15, "unnest", "f", 2283, [2277], True)):
        yield {"oid": 8000 + oid, "proname": name, "pronamespace": PG_CATALOG,
               "proowner": BOOTSTRAP_SUPERUSER, "prolang": 12, "procost": 1.0,
               "prorows": 1000.0 if retset else 0.0, "provariadic": 0, "prosupport": 0,
               "prokind": kind, "prosecdef": False, "proleakproof": False,
               "proisstrict": True, "proretset": retset, "provolatile": "i",
               "proparallel": "s", "pronargs": len(args), "pronargdefaults": 0,
               "prorettype": ret, "proargtypes": args, "prosrc": name}


def _empty(namespace: int, name: str, columns: str, relkind: str = "r") -> None:
    _view(namespace, name, columns, relkind)(lambda cat, snap: ())


_empty(PG_CATALOG, "pg_inherits", "inhrelid oid, inhparent oid, inhseqno int4, "
                                  "inhdetachpending bool")
_empty(PG_CATALOG, "pg_extension", """oid oid, extname name, extowner oid, extnamespace oid,
    extrelocatable bool, extversion text, extconfig oid[], extcondition text[]""")
_empty(PG_CATALOG, "pg_depend", """classid oid, objid oid, objsubid int4, refclassid oid,
    refobjid oid, refobjsubid int4, deptype char""")
_empty(PG_CATALOG, "pg_range", """rngtypid oid, rngsubtype oid, rngmultitypid oid,
    rngcollation oid, rngsubopc oid, rngcanonical regproc, rngsubdiff regproc""")
_empty(PG_CATALOG, "pg_enum", "oid oid, enumtypid oid, enumsortorder float4, enumlabel name")
_empty(PG_CATALOG, "pg_sequence", """seqrelid oid, seqtypid oid, seqstart int8,
    seqincrement int8, seqmax int8, seqmin int8, seqcache int8, seqcycle bool""")
_empty(PG_CATALOG, "pg_trigger", """oid oid, tgrelid oid, tgparentid oid, tgname name,
    tgfoid oid, tgtype int2, tgenabled char, tgisinternal bool, tgconstrrelid oid,
    tgconstrindid oid, tgconstraint oid, tgdeferrable bool, tginitdeferred bool,
    tgnargs int2, tgattr int2vector, tgqual pg_node_tree, tgoldtable name, tgnewtable name""")
_empty(PG_CATALOG, "pg_policy", """oid oid, polname name, polrelid oid, polcmd char,
    polpermissive bool, polroles oid[], polqual pg_node_tree, polwithcheck pg_node_tree""")
_empty(PG_CATALOG, "pg_statistic_ext", """oid oid, stxrelid oid, stxname name,
    stxnamespace oid, stxowner oid, stxstattarget int4, stxkeys int2vector, stxkind char[],
    stxexprs pg_node_tree""")
_empty(PG_CATALOG, "pg_publication", """oid oid, pubname name, pubowner oid,
    puballtables bool, pubinsert bool, pubupdate bool, pubdelete bool, pubtruncate bool,
    pubviaroot bool""")
_empty(PG_CATALOG, "pg_publication_namespace", "oid oid, pnpubid oid, pnnspid oid")
_empty(PG_CATALOG, "pg_publication_rel", """oid oid, prpubid oid, prrelid oid,
    prqual pg_node_tree, prattrs int2vector""")
_empty(PG_CATALOG, "pg_opclass", """oid oid, opcmethod oid, opcname name, opcnamespace oid,
    opcowner oid, opcfamily oid, opcintype oid, opcdefault bool, opckeytype oid""")
_empty(PG_CATALOG, "pg_foreign_table", "ftrelid oid, ftserver oid, ftoptions text[]")
_empty(PG_CATALOG, "pg_partitioned_table", """partrelid oid, partstrat char, partnatts int2,
    partdefid oid, partattrs int2vector, partclass oidvector, partcollation oidvector,
    partexprs pg_node_tree""")
_empty(PG_CATALOG, "pg_views", "schemaname name, viewname name, viewowner name, "
                               "definition text", relkind="v")
_empty(PG_CATALOG, "pg_matviews", """schemaname name, matviewname name, matviewowner name,
    tablespace name, hasindexes bool, ispopulated bool, definition text""", relkind="v")


@_view(PG_CATALOG, "pg_tables", """schemaname name, tablename name, tableowner name,
    tablespace name, hasindexes bool, hasrules bool, hastriggers bool, rowsecurity bool""",
       relkind="v")
def _pg_tables(cat: PgCatalog, snap: _Snapshot):
    for t in snap.tables:
        yield {"schemaname": "public", "tablename": t.name, "tableowner": cat.user,
               "hasindexes": True, "hasrules": False, "hastriggers": False,
               "rowsecurity": False}


@_view(PG_CATALOG, "pg_indexes", """schemaname name, tablename name, indexname name,
    tablespace name, indexdef text""", relkind="v")
def _pg_indexes(cat: PgCatalog, snap: _Snapshot):
    for t in snap.tables:
        yield {"schemaname": "public", "tablename": t.name, "indexname": f"{t.name}_pkey",
               "indexdef": _indexdef(t, 0)}


# -- information_schema ----------------------------------------------------------------------
@_view(INFORMATION_SCHEMA, "schemata", """catalog_name name, schema_name name,
    schema_owner name, default_character_set_catalog name, default_character_set_schema name,
    default_character_set_name name, sql_path varchar""", relkind="v")
def _schemata(cat: PgCatalog, snap: _Snapshot):
    for name in NAMESPACES.values():
        yield {"catalog_name": cat.database, "schema_name": name, "schema_owner": cat.user}


@_view(INFORMATION_SCHEMA, "tables", """table_catalog name, table_schema name, table_name name,
    table_type varchar, self_referencing_column_name name, reference_generation varchar,
    user_defined_type_catalog name, user_defined_type_schema name,
    user_defined_type_name name, is_insertable_into varchar, is_typed varchar,
    commit_action varchar""", relkind="v")
def _is_tables(cat: PgCatalog, snap: _Snapshot):
    for r in snap.relations():
        if r.kind == "i":
            continue
        yield {"table_catalog": cat.database, "table_schema": NAMESPACES[r.namespace],
               "table_name": r.name, "table_type": "BASE TABLE" if r.kind == "r" else "VIEW",
               "is_insertable_into": "YES" if r.namespace == PUBLIC else "NO",
               "is_typed": "NO"}


_IS_COLUMNS = """table_catalog name, table_schema name, table_name name, column_name name,
    ordinal_position int4, column_default varchar, is_nullable varchar, data_type varchar,
    character_maximum_length int4, character_octet_length int4, numeric_precision int4,
    numeric_precision_radix int4, numeric_scale int4, datetime_precision int4,
    interval_type varchar, interval_precision int4, character_set_catalog name,
    character_set_schema name, character_set_name name, collation_catalog name,
    collation_schema name, collation_name name, domain_catalog name, domain_schema name,
    domain_name name, udt_catalog name, udt_schema name, udt_name name, scope_catalog name,
    scope_schema name, scope_name name, maximum_cardinality int4, dtd_identifier name,
    is_self_referencing varchar, is_identity varchar, identity_generation varchar,
    identity_start varchar, identity_increment varchar, identity_maximum varchar,
    identity_minimum varchar, identity_cycle varchar, is_generated varchar,
    generation_expression varchar, is_updatable varchar"""


def _is_column(cat: PgCatalog, schema: str, table: str, pos: int, name: str, typid: int,
               typmod: int, nullable: bool, default: str | None, updatable: bool) -> dict:
    t = TYPES[typid]
    data_type = "ARRAY" if t.category == "A" else format_type(typid, None)
    row = {"table_catalog": cat.database, "table_schema": schema, "table_name": table,
           "column_name": name, "ordinal_position": pos, "column_default": default,
           "is_nullable": "YES" if nullable else "NO", "data_type": data_type,
           "udt_catalog": cat.database, "udt_schema": "pg_catalog", "udt_name": t.name,
           "dtd_identifier": str(pos), "is_self_referencing": "NO", "is_identity": "NO",
           "identity_cycle": "NO", "is_generated": "NEVER",
           "is_updatable": "YES" if updatable else "NO"}
    if typid in (1043, 1042) and typmod >= 4:
        row["character_maximum_length"] = typmod - 4
        row["character_octet_length"] = (typmod - 4) * 4
    elif typid in (25, 1043, 1042):
        row["character_octet_length"] = 1073741824
    if typid in (21, 23, 20):
        row.update(numeric_precision={21: 16, 23: 32, 20: 64}[typid], numeric_precision_radix=2,
                   numeric_scale=0)
    elif typid in (700, 701):
        row.update(numeric_precision=24 if typid == 700 else 53, numeric_precision_radix=2)
    elif typid == 1700:
        row["numeric_precision_radix"] = 10
        if typmod >= 4:
            row.update(numeric_precision=(typmod - 4) >> 16, numeric_scale=(typmod - 4) & 0xFFFF)
    elif typid in (1082, 1114, 1184):
        row["datetime_precision"] = 0 if typid == 1082 else 6
    return row


@_view(INFORMATION_SCHEMA, "columns", _IS_COLUMNS, relkind="v")
def _is_columns(cat: PgCatalog, snap: _Snapshot):
    for v in VIEWS.values():
        for i, (name, typ) in enumerate(v.columns):
            yield _is_column(cat, NAMESPACES[v.namespace], v.name, i + 1, name,
                             _VIEW_COLUMN_OIDS[typ], -1, True, None, False)
    for t in snap.tables:
        for i, c in enumerate(t.columns):
            typid, typmod = column_type(c)
            yield _is_column(cat, "public", t.name, i + 1, c.name, typid, typmod, c.nullable,
                             default_sql(c), True)


@_view(INFORMATION_SCHEMA, "table_constraints", """constraint_catalog name,
    constraint_schema name, constraint_name name, table_catalog name, table_schema name,
    table_name name, constraint_type varchar, is_deferrable varchar,
    initially_deferred varchar, enforced varchar, nulls_distinct varchar""", relkind="v")
def _is_table_constraints(cat: PgCatalog, snap: _Snapshot):
    for t in snap.tables:
        yield {"constraint_catalog": cat.database, "constraint_schema": "public",
               "constraint_name": f"{t.name}_pkey", "table_catalog": cat.database,
               "table_schema": "public", "table_name": t.name,
               "constraint_type": "PRIMARY KEY", "is_deferrable": "NO",
               "initially_deferred": "NO", "enforced": "YES"}


@_view(INFORMATION_SCHEMA, "key_column_usage", """constraint_catalog name,
    constraint_schema name, constraint_name name, table_catalog name, table_schema name,
    table_name name, column_name name, ordinal_position int4,
    position_in_unique_constraint int4""", relkind="v")
def _is_key_column_usage(cat: PgCatalog, snap: _Snapshot):
    for t in snap.tables:
        for i, k in enumerate(t.meta.schema.key_names):
            yield {"constraint_catalog": cat.database, "constraint_schema": "public",
                   "constraint_name": f"{t.name}_pkey", "table_catalog": cat.database,
                   "table_schema": "public", "table_name": t.name, "column_name": k,
                   "ordinal_position": i + 1}


_empty(INFORMATION_SCHEMA, "views", """table_catalog name, table_schema name, table_name name,
    view_definition varchar, check_option varchar, is_updatable varchar,
    is_insertable_into varchar, is_trigger_updatable varchar, is_trigger_deletable varchar,
    is_trigger_insertable_into varchar""", relkind="v")
_empty(INFORMATION_SCHEMA, "referential_constraints", """constraint_catalog name,
    constraint_schema name, constraint_name name, unique_constraint_catalog name,
    unique_constraint_schema name, unique_constraint_name name, match_option varchar,
    update_rule varchar, delete_rule varchar""", relkind="v")


def _system_oids() -> None:
    """OIDs of the views: PostgreSQL's for the catalogs it has, else stable ones below
    FIRST_USER_OID derived from the name."""
    used = set(SYSTEM_RELATION_OIDS.values())
    for q, v in sorted(VIEWS.items()):
        oid = SYSTEM_RELATION_OIDS.get(v.name) if v.namespace == PG_CATALOG else None
        if oid is None:
            h = int.from_bytes(hashlib.blake2b(q.encode(), digest_size=4).digest(), "big")
            oid = 12000 + h % 4000
            while oid in used:
                oid = 12000 + (oid - 12000 + 1) % 4000
        used.add(oid)
        VIEWS[q] = dataclasses.replace(v, oid=oid)


_system_oids()
_VIEW_BY_OID = {v.oid: v for v in VIEWS.values()}
_SYSTEM_OIDS = frozenset(_VIEW_BY_OID)


# -- functions -------------------------------------------------------------------------------
def _indexdef(t: _TableInfo, column: int, pretty: bool = False) -> str:
    """pg_get_indexdef: the statement, or the column name for column > 0; the pretty form
    leaves out the schema of a visible table (as psql shows it)."""
    keys = [t.columns[k - 1].name for k in t.key_attnums]
    if column:
        return quote_ident(keys[column - 1]) if 1 <= column <= len(keys) else ""
    table = quote_ident(t.name) if pretty else f"public.{quote_ident(t.name)}"
    return (f"CREATE UNIQUE INDEX {quote_ident(t.name + '_pkey')} ON {table} USING btree "
            f"({', '.join(quote_ident(k) for k in keys)})")


def _constraintdef(t: _TableInfo) -> str:
    keys = [t.columns[k - 1].name for k in t.key_attnums]
    return f"PRIMARY KEY ({', '.join(quote_ident(k) for k in keys)})"


def _py(v: pa.Scalar) -> Any:
    """A scalar argument as a Python value (SQL arrays as lists)."""
    return array_to_list(v).as_py() if isinstance(v.type, ArrayType) else v.as_py()


def _rows(values: list[Value], n: int) -> Iterable[tuple]:
    """The argument tuples of a call, one per row (constants repeated)."""
    cols = []
    for v in values:
        if isinstance(v, pa.Scalar):
            cols.append(None)
        else:
            cols.append(array_to_list(v).to_pylist() if isinstance(v.type, ArrayType)
                        else v.to_pylist())
    consts = [_py(v) if isinstance(v, pa.Scalar) else None for v in values]
    for r in range(n):
        yield tuple(c[r] if c is not None else k for c, k in zip(cols, consts))


def _per_value(fn: Callable[..., Any], out_type: pa.DataType
               ) -> Callable[[list[Value], int], Value]:
    """A HostFunction body from a Python function of one row's arguments. Calls are made
    once per distinct argument tuple (catalog lookups: few distinct OIDs and names)."""
    def call(values: list[Value], n: int) -> Value:
        if all(isinstance(v, pa.Scalar) for v in values):
            return _scalar(fn(*[_py(v) for v in values]), out_type)
        memo: dict[tuple, Any] = {}
        out = []
        for args in _rows(values, n):     # per row, memoised: see the docstring
            if args not in memo:
                memo[args] = fn(*args)
            out.append(memo[args])
        return _array(out, out_type)
    return call


def _strict(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NULL in, NULL out (PostgreSQL's STRICT functions)."""
    def wrapped(*args):
        return None if any(a is None for a in args) else fn(*args)
    return wrapped


def _oid_arg(v: Any) -> int:
    return int(v) if not isinstance(v, int) else v


def _host_functions(cat: PgCatalog) -> dict[str, HostFunction]:
    text, boolean, oid, i32 = pa.string(), pa.bool_(), pa.int64(), pa.int32()
    fns: dict[str, HostFunction] = {}

    def to_oid(v: Any) -> Any:
        """An OID argument given as text ('16399', or a relation name as regclass)."""
        if isinstance(v, str):
            return int(v) if v.strip().isdigit() else cat.regclass(v)
        return v

    def define(name: str, fn: Callable[..., Any], out: pa.DataType, *, strict: bool = True,
               volatile: bool = False, nargs: tuple[int, ...] | None = None,
               oids: tuple[int, ...] = ()) -> None:
        inner = _strict(fn) if strict else fn

        def coerced(*args):
            return inner(*[to_oid(a) if i in oids else a for i, a in enumerate(args)])
        body = _per_value(coerced if oids else inner, out)

        def call(values: list[Value], n: int) -> Value:
            if nargs is not None and len(values) not in nargs:
                raise SqlError(f"function {name} with {len(values)} arguments does not exist",
                               "42883")
            return body(values, n)
        fns[name] = HostFunction(name, call, volatile=volatile)

    def snap() -> _Snapshot:
        return cat.snapshot()

    def const(name: str, value: Callable[[], Any], out: pa.DataType) -> None:
        fns[name] = HostFunction(name, lambda values, n: pa.scalar(value(), out))

    # session
    for name in ("current_user", "session_user", "user", "current_role"):
        const(name, lambda: cat.user, text)
    for name in ("current_database", "current_catalog"):
        const(name, lambda: cat.database, text)
    const("current_schema", lambda: "public", text)
    const("version", lambda: cat.version, text)
    const("pg_backend_pid", lambda: cat.pid, i32)
    const("pg_is_in_recovery", lambda: False, boolean)
    define("current_schemas", lambda implicit: (["pg_catalog"] if implicit else []) +
           ["public"], ArrayType(text), nargs=(1,))

    def current_setting(name, missing_ok=False):
        v = cat.settings.get(name)
        if v is None and not missing_ok:
            raise UndefinedObject(f'unrecognized configuration parameter "{name}"')
        return v
    define("current_setting", current_setting, text, volatile=True, nargs=(1, 2))

    def set_config(name, value, is_local):
        cat.settings.set(name, value)
        return cat.settings.get(name)
    define("set_config", set_config, text, strict=False, volatile=True, nargs=(3,))

    # types
    define("format_type", lambda typid, typmod=None: format_type(typid, typmod), text,
           strict=False, nargs=(2,), oids=(0,))

    def regtype_in(name):
        if isinstance(name, int):
            return name
        text_ = name.strip()
        if re.fullmatch(r"\d+", text_):
            return int(text_)
        t = _type_oid(text_)
        if t is None:
            raise UndefinedObject(f'type "{text_}" does not exist')
        return t
    define("regtype", regtype_in, oid, nargs=(1,))
    define("to_regtype", lambda name: _type_oid(name), oid, nargs=(1,))
    define("regtypeout", lambda typid: "-" if typid == 0 else format_type(typid, None)
           if typid in TYPES else str(typid), text, nargs=(1,))

    # relations
    define("regclass", lambda v: v if isinstance(v, int) else cat.regclass(v), oid, nargs=(1,))

    def to_regclass(name):
        try:
            return cat.regclass(name)
        except SqlError:
            return None
    define("to_regclass", to_regclass, oid, nargs=(1,))
    define("regclassout", lambda relid: "-" if relid == 0 else cat.relation_name(relid), text,
           nargs=(1,), oids=(0,))

    def regnamespace_in(v):
        if isinstance(v, int) or re.fullmatch(r"\s*\d+\s*", v):
            return int(v)
        names = {n: o for o, n in NAMESPACES.items()}
        name = _split_qualified(v)[-1]
        if name not in names:
            raise UndefinedObject(f'schema "{v}" does not exist')
        return names[name]
    define("regnamespace", regnamespace_in, oid, nargs=(1,))
    define("regnamespaceout", lambda o: NAMESPACES.get(o, str(o)), text, nargs=(1,))

    def regrole_in(v):
        if isinstance(v, int) or re.fullmatch(r"\s*\d+\s*", v):
            return int(v)
        if _split_qualified(v)[-1] != cat.user.lower() and v != cat.user:
            raise UndefinedObject(f'role "{v}" does not exist')
        return BOOTSTRAP_SUPERUSER
    define("regrole", regrole_in, oid, nargs=(1,))
    define("regroleout", lambda o: cat.user if o == BOOTSTRAP_SUPERUSER else str(o), text,
           nargs=(1,))
    define("regproc", lambda v: v if isinstance(v, int) else 0, oid, nargs=(1,))
    define("regprocout", lambda o: "-" if o == 0 else str(o), text, nargs=(1,))

    def table_is_visible(relid):
        r = snap().relation(relid)
        return None if r is None else r.namespace in (PG_CATALOG, PUBLIC)
    define("pg_table_is_visible", table_is_visible, boolean, nargs=(1,), oids=(0,))
    define("pg_type_is_visible", lambda typid: True if typid in TYPES else None, boolean,
           nargs=(1,), oids=(0,))
    for name in ("pg_function_is_visible", "pg_opclass_is_visible",
                 "pg_collation_is_visible", "pg_conversion_is_visible"):
        define(name, lambda o: True, boolean, nargs=(1,))

    define("pg_get_userbyid", lambda o: cat.user if o == BOOTSTRAP_SUPERUSER else
           f"unknown (OID={o})", text, nargs=(1,), oids=(0,))
    define("pg_encoding_to_char", lambda e: {6: "UTF8", 0: "SQL_ASCII"}.get(e, ""), text,
           nargs=(1,))
    define("pg_char_to_encoding", lambda e: 6 if e.upper().replace("-", "") == "UTF8" else -1,
           i32, nargs=(1,))
    # pg_attrdef.adbin (and other pg_node_tree columns) already hold SQL text
    define("pg_get_expr", lambda expr, relid, pretty=False: expr, text, nargs=(2, 3))

    def indexdef(index_oid, column=0, pretty=False):
        t = snap().index_by_oid.get(index_oid)
        return None if t is None else _indexdef(t, column or 0, bool(pretty))
    define("pg_get_indexdef", indexdef, text, nargs=(1, 3), oids=(0,))

    def constraintdef(con_oid, pretty=False):
        t = snap().constraint_by_oid.get(con_oid)
        return None if t is None else _constraintdef(t)
    define("pg_get_constraintdef", constraintdef, text, nargs=(1, 2), oids=(0,))

    def obj_description(objoid, catalog_name=None):
        s = snap()
        t = s.by_oid.get(objoid)
        if t is not None and catalog_name in (None, "pg_class"):
            return t.meta.comment
        if objoid == PUBLIC and catalog_name in (None, "pg_namespace"):
            return "standard public schema"
        return None
    define("obj_description", obj_description, text, nargs=(1, 2), oids=(0,))
    define("col_description", lambda relid, attnum: None, text, nargs=(2,))
    define("shobj_description", lambda o, c: None, text, nargs=(2,))

    for name in ("has_table_privilege", "has_schema_privilege", "has_database_privilege",
                 "has_column_privilege", "has_function_privilege", "has_sequence_privilege",
                 "has_any_column_privilege", "has_type_privilege", "has_tablespace_privilege",
                 "has_foreign_data_wrapper_privilege", "has_server_privilege",
                 "has_language_privilege", "pg_has_role"):
        define(name, lambda *args: True, boolean, strict=False)
    for name in ("pg_get_serial_sequence", "pg_get_triggerdef", "pg_get_partkeydef",
                 "pg_get_statisticsobjdef_columns", "pg_get_function_result",
                 "pg_get_function_arguments", "pg_get_function_identity_arguments",
                 "pg_get_viewdef", "pg_get_ruledef"):
        define(name, lambda *args: None, text, strict=False)
    define("pg_relation_is_publishable", lambda relid: False, boolean, nargs=(1,), oids=(0,))
    for name in ("pg_relation_size", "pg_total_relation_size", "pg_table_size",
                 "pg_indexes_size", "pg_database_size"):
        define(name, lambda *args: 0, pa.int64(), strict=False)
    define("pg_size_pretty", lambda n: f"{n} bytes", text, nargs=(1,))
    define("quote_ident", quote_ident, text, nargs=(1,))
    define("pg_sleep", lambda seconds: time.sleep(float(seconds)), pa.null(), volatile=True,
           nargs=(1,))
    for name in ("pg_advisory_unlock_all", "pg_advisory_lock", "pg_advisory_unlock",
                 "pg_try_advisory_lock"):
        define(name, lambda *args: True if args else None,
               pa.bool_() if name != "pg_advisory_unlock_all" else pa.null(), strict=False,
               volatile=True)
    # set-returning: arrays the binder unnests
    define("pg_partition_ancestors", lambda relid: [relid], ArrayType(oid), nargs=(1,),
           oids=(0,))
    return fns


def _type_oid(name: str) -> int | None:
    """A type name as to_regtype reads it -> OID (None if unknown)."""
    n = " ".join(name.strip().lower().split())
    array = n.endswith("[]")
    if array:
        n = n[:-2].strip()
    n = n.removeprefix("pg_catalog.")
    n = re.sub(r"\s*\(.*\)", "", n)      # character varying(20) -> character varying
    oid = TYPE_BY_NAME.get(n) or TYPE_BY_NAME.get(n.strip('"'))
    if oid is None:
        return None
    return TYPES[oid].array or None if array else oid


__all__ = ["TYPES", "VIEWS", "PgCatalog", "SystemView", "derived_oid", "format_type",
           "quote_ident"]
