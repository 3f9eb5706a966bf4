"""The boundary where a statement's failures become SQL errors (the session's contract with
every front end: the DB-API driver, the shell, the wire server).

    with sql_errors(offset): ...   engine errors -> SqlError with their SQLSTATE; positions
                                   moved into the caller's text; anything else -> XX000
    QueryCanceled                  57014, raised by `Session.cancel` at the next check
"""

from __future__ import annotations

import contextlib
import logging

from engine import errors as engine_errors
from planner.errors import SqlError

_log = logging.getLogger("kudusql.session")


class QueryCanceled(SqlError):
    sqlstate = "57014"


class InternalError(SqlError):
    """A failure that is a bug in kudusql (an exception no layer turned into a SQL error):
    the statement fails with XX000 in SQL's words; the traceback goes to the log."""
    sqlstate = "XX000"


INTERNAL_ERROR_MESSAGE = ("internal error: the statement failed unexpectedly (a bug in "
                          "kudusql; the server log has the details)")


@contextlib.contextmanager
def sql_errors(offset: int = 0):
    """Errors as the session reports them: engine errors become SqlError with their
    SQLSTATE, and positions (relative to a statement `offset` characters into the text the
    caller passed) become positions in that text. This is the boundary the DB-API driver,
    the shell and the wire server rely on: anything else that escapes a statement (an
    AssertionError in sqlglot, an ArrowInvalid no operator expected, ...) is a kudusql bug
    and becomes XX000 with a message in SQL's words, never a Python repr; the traceback is
    logged and chained as the cause."""
    try:
        yield
    except engine_errors.EngineError as e:
        raise SqlError.from_engine(e) from None
    except SqlError as e:
        if e.position is not None:
            e.position += offset
        raise
    except MemoryError:
        raise SqlError("out of memory", "53200") from None
    except Exception as e:  # noqa: BLE001 - the boundary: see the docstring
        _log.error("internal error in a statement", exc_info=True)
        raise InternalError(INTERNAL_ERROR_MESSAGE) from e


def engine_errors_as_sql(batches):
    with sql_errors():
        yield from batches
