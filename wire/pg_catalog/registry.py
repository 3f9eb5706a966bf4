"""The system views' registry and the catalog snapshot they are built from.

`register_view(namespace, name, columns)` registers a view (a `ViewDef`: its columns as
PostgreSQL types and a function yielding one dict per row) in `VIEWS`; the view modules
(pg_views.py, information_schema.py) register theirs when imported, and the package's
__init__ then calls `seal()`, which gives every view its OID. `CatalogSnapshot` is one
catalog state: the user tables with their OIDs and each view's Arrow table, built once on first
use. `SystemView` is what the planner scans (`virtual`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import pyarrow as pa

from engine.schema import ColumnSchema, Schema
from engine.types import DataType
from planner.ddl import declared_columns
from planner.errors import SqlError
from planner.expr import ArrayType, list_to_array
from wire.pg_catalog.oids import (
    BTREE_AM,
    FIRST_USER_OID,
    HEAP_AM,
    NAMESPACES,
    PG_CATALOG,
    PUBLIC,
    SYSTEM_RELATION_OIDS,
    TYPES as PG_TYPES,
    derived_oid,
    quote_ident,
)
from wire.type_oids import type_oid


class SessionCatalog(Protocol):
    """What the views and the catalog functions read of the session's catalog: the
    `PgCatalog` (wire/pg_catalog/catalog.py) is one; named here so that they never import
    the module that imports them."""

    user: str
    database: str
    pid: int
    version: str
    settings: Any                        # wire.settings.Settings, or a local stand-in
    prepared: Callable[[], list[dict]]   # the rows of pg_prepared_statements

    def snapshot(self) -> CatalogSnapshot: ...
    def regclass(self, name: str) -> int: ...
    def relation_name(self, oid: int) -> str: ...
    def view_table(self, view: ViewDef) -> pa.Table: ...   # the view's rows, cached


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
class UserView:
    """One user view (CREATE VIEW) as PostgreSQL sees it: relkind 'v', its columns with
    the type OIDs its Arrow types are described with on the wire."""
    meta: Any                               # engine ViewMetadata
    oid: int
    columns: list[tuple[str, int, int]]     # (name, type oid, typmod), attnum = position + 1

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def definition(self) -> str:
        """pg_views.definition / pg_get_viewdef: the query as written, `;`-terminated."""
        return " " + self.meta.query.strip() + ";"


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


class CatalogSnapshot:
    """The user tables of one catalog state, with their OIDs, and the views built from them
    (each built once, on first use)."""

    def __init__(self, metas: list[Any], views: list[Any] = ()):
        self.metas = metas
        self.view_metas = list(views)
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
        self.user_views: list[UserView] = []
        for v in sorted(self.view_metas, key=lambda v: v.name):
            cols = []
            for f in v.schema:
                typid, typmod = type_oid(f.type)
                cols.append((f.name, typid if typid in PG_TYPES else 25, typmod))
            self.user_views.append(UserView(v, claim("view", v.id or v.name), cols))
        self.view_by_oid = {v.oid: v for v in self.user_views}
        self.view_by_name = {v.name: v for v in self.user_views}
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
        for v in self.user_views:
            out.append(_Relation(v.oid, v.name, PUBLIC, "v", len(v.columns)))
        return out

    def relation(self, oid: int) -> _Relation | None:
        v = _VIEW_BY_OID.get(oid)
        if v is not None:
            return _Relation(v.oid, v.name, v.namespace, v.relkind, len(v.columns))
        t = self.by_oid.get(oid)
        if t is not None:
            return _Relation(t.oid, t.name, PUBLIC, "r", len(t.columns), HEAP_AM, True)
        uv = self.view_by_oid.get(oid)
        if uv is not None:
            return _Relation(uv.oid, uv.name, PUBLIC, "v", len(uv.columns))
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
class ViewDef:
    name: str
    namespace: int
    columns: tuple[tuple[str, str], ...]            # (column, pg type name)
    rows: Callable[[SessionCatalog, CatalogSnapshot], Iterable[dict]]
    relkind: str = "r"
    oid: int = 0

    @property
    def qualified(self) -> str:
        return f"{NAMESPACES[self.namespace]}${self.name}"


VIEWS: dict[str, ViewDef] = {}       # qualified name (`pg_catalog$pg_class`) -> definition


def register_view(namespace: int, name: str, columns: str, relkind: str = "r"):
    """Register a view: `columns` is "name type, name type, ..."; the decorated function
    yields one dict per row (missing columns are NULL)."""
    cols = tuple(tuple(c.strip().rsplit(" ", 1)) for c in columns.split(",") if c.strip())

    def register(fn):
        v = ViewDef(name, namespace, cols, fn, relkind)
        VIEWS[v.qualified] = v
        return fn
    return register


class SystemView:
    """One system view of one catalog snapshot: what the planner scans (`virtual`)."""

    virtual = True

    def __init__(self, owner: SessionCatalog, view: ViewDef):
        self._owner = owner
        self._view = view
        self.name = view.qualified
        self.schema = _view_schema(view)

    def to_arrow(self, columns: list[str]) -> pa.Table:
        return self._owner.view_table(self._view).select(columns)

    def _refuse(self, *args, **kwargs):
        raise SqlError(f'cannot change system view "{self._view.name}"', "42809")

    insert = upsert = update = delete = write = scan = diff_scan = _refuse

    def __repr__(self) -> str:
        return f"SystemView({self.name})"


_SCHEMAS: dict[str, Schema] = {}


def _view_schema(view: ViewDef) -> Schema:
    s = _SCHEMAS.get(view.qualified)
    if s is None:
        cols = []
        for name, typ in view.columns:
            dtype, arrow = _COLUMN_TYPES[typ]
            cols.append(_ViewColumn(name, dtype, arrow=arrow))
        s = _SCHEMAS[view.qualified] = Schema(cols, key=[cols[0].name])
    return s


def build_view_table(view: ViewDef, rows: Iterable[dict]) -> pa.Table:
    rows = list(rows)
    types = [_COLUMN_TYPES[t][1] for _, t in view.columns]
    return pa.Table.from_arrays(
        [to_arrow_array([r.get(name) for r in rows], typ)
         for (name, _), typ in zip(view.columns, types)],
        schema=pa.schema([pa.field(name, typ) for (name, _), typ in zip(view.columns, types)]))


def to_arrow_array(values: list, typ: pa.DataType) -> pa.Array:
    """Python values -> an Arrow array of `typ` (SQL arrays from Python lists)."""
    if isinstance(typ, ArrayType):
        return list_to_array(pa.array(values, pa.list_(typ.value_type)))
    return pa.array(values, typ)


def to_arrow_scalar(value: Any, typ: pa.DataType) -> pa.Scalar:
    if isinstance(typ, ArrayType):
        return list_to_array(pa.scalar(value, pa.list_(typ.value_type)))
    return pa.scalar(value, typ)


def register_empty_view(namespace: int, name: str, columns: str, relkind: str = "r") -> None:
    register_view(namespace, name, columns, relkind)(lambda cat, snap: ())


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


_VIEW_BY_OID: dict[int, ViewDef] = {}     # filled by seal()
_SYSTEM_OIDS: set[int] = set()


def seal() -> None:
    """Give the registered views their OIDs: called once, by the package's __init__, after
    every view module has registered its views."""
    _system_oids()
    _VIEW_BY_OID.update({v.oid: v for v in VIEWS.values()})
    _SYSTEM_OIDS.update(_VIEW_BY_OID)


def index_definition(t: _TableInfo, column: int, pretty: bool = False) -> str:
    """pg_get_indexdef: the statement, or the column name for column > 0; the pretty form
    leaves out the schema of a visible table (as psql shows it)."""
    keys = [t.columns[k - 1].name for k in t.key_attnums]
    if column:
        return quote_ident(keys[column - 1]) if 1 <= column <= len(keys) else ""
    table = quote_ident(t.name) if pretty else f"public.{quote_ident(t.name)}"
    return (f"CREATE UNIQUE INDEX {quote_ident(t.name + '_pkey')} ON {table} USING btree "
            f"({', '.join(quote_ident(k) for k in keys)})")


def constraint_definition(t: _TableInfo) -> str:
    keys = [t.columns[k - 1].name for k in t.key_attnums]
    return f"PRIMARY KEY ({', '.join(quote_ident(k) for k in keys)})"
