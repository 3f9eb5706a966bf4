"""`PgCatalog`: the engine catalog plus pg_catalog / information_schema for one session.

Name resolution (pg_catalog first on the search path), DDL refused on system views and
delegated for user tables, snapshots rebuilt when a DDL published new table metadata, the
regclass lookups the functions use; see the package docstring.
"""
from __future__ import annotations

import re
import threading
from typing import Any

import pyarrow as pa

from planner.binder.views import catalog_views
from planner.errors import SqlError
from planner.expr import HostFunction
from wire.pg_catalog.functions import host_functions
from wire.pg_catalog.oids import NAMESPACES, PG_CATALOG, PUBLIC, split_qualified_name, quote_ident, \
    version_string
from wire.pg_catalog.pg_views import SESSION_VIEWS, DEFAULT_SETTINGS
from wire.pg_catalog.registry import (
    VIEWS,
    CatalogSnapshot,
    SystemView,
    ViewDef,
    build_view_table,
)
from wire.settings import SERVER_VERSION


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
        self._snapshot: CatalogSnapshot | None = None
        self._lock = threading.Lock()
        self._functions = host_functions(self)

    # -- delegation and name resolution ----------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)

    @property
    def catalog_source(self) -> Any:
        """The catalog whose `catalog_version` numbers what this one shows (the wrapped
        one's source): read once by the plan cache instead of through `__getattr__`."""
        return getattr(self._catalog, "catalog_source", self._catalog)

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
    def snapshot(self) -> CatalogSnapshot:
        metas = [self._catalog.get_table(n) for n in self._catalog.list_tables()]
        views = list(catalog_views(self._catalog).values())
        with self._lock:
            s = self._snapshot
            if s is None or len(s.metas) != len(metas) or any(
                    a is not b for a, b in zip(s.metas, metas)) or \
                    len(s.view_metas) != len(views) or any(
                    a is not b for a, b in zip(s.view_metas, views)):
                s = self._snapshot = CatalogSnapshot(metas, views)
            return s

    def view_table(self, view: ViewDef) -> pa.Table:
        snap = self.snapshot()
        if view.qualified in SESSION_VIEWS:        # session state: never cached
            return build_view_table(view, view.rows(self, snap))
        with snap.lock:
            t = snap.views.get(view.qualified)
            if t is None:
                t = snap.views[view.qualified] = build_view_table(view, view.rows(self, snap))
            return t

    # -- lookups used by the functions ------------------------------------------------------
    def regclass(self, name: str) -> int:
        """A relation name (optionally schema-qualified and quoted) or numeric OID -> OID."""
        text = name.strip()
        if re.fullmatch(r"\d+", text):
            return int(text)
        parts = split_qualified_name(text)
        schema, rel = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[-1])
        snap = self.snapshot()
        if schema in (None, "pg_catalog", "information_schema"):
            ns = schema or "pg_catalog"
            v = VIEWS.get(f"{ns}${rel}")
            if v is not None:
                return v.oid
        if schema in (None, "public"):
            t = snap.by_name.get(rel) or snap.view_by_name.get(rel)
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
            v = next((d for k, d in DEFAULT_SETTINGS.items() if k.lower() == name.lower()), None)
        return v

    def set(self, name: str, value: str) -> None:
        self._values[name.lower()] = value
