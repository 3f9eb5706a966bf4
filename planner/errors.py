"""SQL-layer errors: each carries a PostgreSQL SQLSTATE and, where known, a position.

`position` is PostgreSQL's ErrorResponse `P` field: a 1-based character offset into the
statement text (None when unknown). The wire layer copies it as is; the shell draws a caret.
`detail` and `hint` are its `D` and `H` fields.

Messages are in SQL's words (docs/sql.md, "Error messages"): PostgreSQL's wording where it
has one (`syntax error at or near "SELEC"`), values written as SQL literals
(`engine.types.sql_literal`), never a Python class name or repr.
Engine errors (`engine.errors.EngineError`) already carry a SQLSTATE; the planner converts
them with `SqlError.from_engine` where it wants to add a position.
"""

from __future__ import annotations


class SqlError(Exception):
    """Base class: message, SQLSTATE, 1-based character position (or None)."""

    sqlstate = "XX000"

    def __init__(self, message: str, sqlstate: str | None = None,
                 position: int | None = None, *, detail: str | None = None,
                 hint: str | None = None):
        super().__init__(message)
        self.message = message
        if sqlstate is not None:
            self.sqlstate = sqlstate
        self.position = position
        self.detail = detail
        self.hint = hint

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, {self.sqlstate!r}, {self.position!r})"

    @classmethod
    def from_engine(cls, err: Exception, position: int | None = None) -> SqlError:
        return cls(str(err), getattr(err, "sqlstate", None) or cls.sqlstate, position,
                   detail=getattr(err, "detail", None), hint=getattr(err, "hint", None))


class SqlSyntaxError(SqlError):
    sqlstate = "42601"  # syntax_error


class UndefinedObject(SqlError):
    sqlstate = "42704"  # undefined_object (unknown type)


class InvalidTableDefinition(SqlError):
    sqlstate = "42P16"  # invalid_table_definition


class InvalidParameterValue(SqlError):
    sqlstate = "22023"  # invalid_parameter_value


class FeatureNotSupported(SqlError):
    sqlstate = "0A000"  # feature_not_supported
