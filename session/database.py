"""Database: one data directory opened in this process - the catalog (tables, tablets) and
the maintenance manager's thread - and the factory of its sessions (session/session.py).

    db = Database.open("data-dir")          # or Database(catalog, maintenance) over a given
    s = db.session()                        #   catalog (a remote TableCatalog, for instance)
    db.close()
"""

from __future__ import annotations

from engine.catalog import Catalog
from engine.tablet.maintenance_manager import MaintenanceManager
from planner.guard import default_query_mem_limit, parse_bytes
from session.session import Session


class Database:
    """One data directory: the catalog (tables, tablets) and the maintenance thread."""

    def __init__(self, catalog: Catalog, maintenance: MaintenanceManager | None,
                 query_mem_limit: int | None = None):
        self.catalog = catalog
        self.maintenance = maintenance
        self.query_mem_limit = default_query_mem_limit() if query_mem_limit is None \
            else parse_bytes(query_mem_limit)
        self._closed = False
        self.metrics = None  # engine.metrics.ServerMetrics when a server exposes /metrics

    @classmethod
    def open(cls, path: str, *, maintenance: bool = True, config=None,
             query_mem_limit: int | str | None = None) -> "Database":
        """`query_mem_limit`: sessions' default per-statement memory limit (bytes or
        '2GB'; None: a quarter of the machine's RAM; 0: none)."""
        limit = None if query_mem_limit is None else parse_bytes(query_mem_limit)
        mm = MaintenanceManager().start() if maintenance else None
        try:
            cat = Catalog.open(path, config=config, maintenance=mm)
        except BaseException:
            if mm is not None:
                mm.shutdown()
            raise
        return cls(cat, mm, limit)

    def session(self, catalog=None) -> "Session":
        """A new session; `catalog` replaces the engine catalog for name resolution (the
        wire server passes a wrapper that adds pg_catalog / information_schema views)."""
        return Session(self, catalog)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.maintenance is not None:
            self.maintenance.shutdown()
        self.catalog.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
