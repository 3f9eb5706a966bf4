"""kudusql: Apache Kudu's storage design with a SQL front end on the Postgres wire.

`kudusql.connect("data-dir")` opens an embedded database (PEP 249, see kudusql/dbapi.py);
`kudusql.session.Database` is the entry point the servers and tools share.
"""

from kudusql.dbapi import (  # noqa: F401 - the PEP 249 module interface
    BINARY, DATETIME, NUMBER, ROWID, STRING, Binary, Connection, Cursor, DataError,
    DatabaseError, Date, Error, IntegrityError, InterfaceError, InternalError,
    NotSupportedError, OperationalError, ProgrammingError, Time, Timestamp, Warning,
    apilevel, connect, paramstyle, threadsafety)
from kudusql.session import Database, Session  # noqa: F401

__version__ = "0.1.0"
