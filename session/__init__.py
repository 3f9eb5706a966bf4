"""session: a database opened in this process and the sessions that run SQL on it - the layer
every front end stands on (ARCHITECTURE.md, docs/architecture.md).

    database.py   Database: a data directory's catalog + maintenance thread; `session()`
    session.py    Session: one connection's state; `execute(sql, params)` runs statements
    errors.py     the SQL-error boundary (`sql_errors`), QueryCanceled (57014), XX000

Layers: engine <- planner <- session <- {kudusql (DB-API driver, `kudusql.connect`), wire,
shell, tpch, kudusql.spark, the `kudusql` command}. The session imports no front end;
tests/test_layering.py holds it to that.
"""

from session.database import Database
from session.errors import InternalError, QueryCanceled
from session.session import Session, split_statements

__all__ = ["Database", "InternalError", "QueryCanceled", "Session", "split_statements"]
