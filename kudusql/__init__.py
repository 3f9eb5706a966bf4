"""kudusql: Apache Kudu's storage design with a SQL front end on the Postgres wire.

`kudusql.connect("data-dir")` opens an embedded database (PEP 249, see kudusql/dbapi.py);
`kudusql.Database` (the `session` package below it) is the entry point the servers and
tools share.
"""

from kudusql.dbapi import (  # noqa: F401 - the PEP 249 module interface
    BINARY, DATETIME, NUMBER, ROWID, STRING, Binary, Connection, Cursor, DataError,
    DatabaseError, Date, Error, IntegrityError, InterfaceError, InternalError,
    NotSupportedError, OperationalError, ProgrammingError, Time, Timestamp, Warning,
    apilevel, paramstyle, threadsafety)
from kudusql import dbapi as _dbapi
from session import Database, Session  # noqa: F401 - the session layer (session/)

__version__ = "0.1.0"


def connect(dsn: str, **kwargs):
    """PEP 249 `connect`: a `postgresql://user:pw@host:port/db` DSN connects to a server
    (kudusql/remote.py, asyncpg); anything else is a data directory opened embedded in this
    process (kudusql/dbapi.py `connect`, keywords to `Database.open`)."""
    if dsn.startswith(("postgresql://", "postgres://")):
        from kudusql.remote import RemoteConnection
        return RemoteConnection(dsn, **kwargs)
    return _dbapi.connect(dsn, **kwargs)
