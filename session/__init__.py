"""session: a database opened in this process and the sessions that run SQL on it - the layer
every front end stands on (ARCHITECTURE.md, docs/architecture.md).

    database.py   Database: a data directory's catalog + maintenance thread; `session()`
    frontdoor.py  the front door: a string -> Statements, each parsed once by the dialect
    session.py    Session: one connection's state; `execute(sql, params)` runs statements,
                  `run(stmt)` one, dispatched on its node's type
    errors.py     the SQL-error boundary (`sql_errors`), QueryCanceled (57014), XX000

Layers: engine <- planner <- session <- {kudusql (DB-API driver, `kudusql.connect`), wire,
shell, tpch, kudusql.spark, the `kudusql` command}. The session imports no front end;
tests/test_layering.py holds it to that.
"""

from session.database import Database
from session.errors import InternalError, QueryCanceled
from session.frontdoor import Statement, split_statements
from session.session import Session

__all__ = ["Database", "InternalError", "QueryCanceled", "Session", "Statement",
           "split_statements"]
