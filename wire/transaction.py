"""Transaction-block status for ReadyForQuery: I (idle), T (in a block), E (failed block).

kudusql applies every statement when it runs (Kudu: each row operation is atomic on its
own), so a transaction block changes what clients are *told*, never what is stored:

    I --BEGIN--> T --error--> E --ROLLBACK / COMMIT (reported as ROLLBACK)--> I
                 T --COMMIT / ROLLBACK--> I          E --ROLLBACK TO sp--> T

- In E every statement but ROLLBACK / COMMIT / ROLLBACK TO is refused with 25P02, as in
  PostgreSQL; clients (psycopg, pgcli, JDBC) rely on it.
- ROLLBACK and ROLLBACK TO never claim to undo: they come with a WARNING notice that the
  writes already applied stay applied (the session's text for ROLLBACK).
- SAVEPOINT / RELEASE / ROLLBACK TO keep PostgreSQL's bookkeeping (25P01 outside a block,
  3B001 for an unknown savepoint) so psycopg's nested `conn.transaction()` works.
- BEGIN inside a block and COMMIT/ROLLBACK outside one succeed with PostgreSQL's warnings.
"""

from __future__ import annotations

from planner.errors import SqlError
from planner.result import StatementResult
from wire.lexer import Words

NOT_UNDONE = ("kudusql applies each statement when it runs (Kudu semantics): ROLLBACK does "
              "not undo writes that were already applied")

# first word(s) of the statements that manage the block
CONTROL = {"begin", "start", "commit", "end", "rollback", "abort", "savepoint", "release"}


class InFailedTransaction(SqlError):
    sqlstate = "25P02"


def allowed_when_failed(words: list[str]) -> bool:
    return bool(words) and words[0] in ("rollback", "abort", "commit", "end")


class TransactionState:
    def __init__(self) -> None:
        self.status = b"I"
        self.savepoints: list[str] = []

    @property
    def in_block(self) -> bool:
        return self.status != b"I"

    def check(self, words: list[str]) -> None:
        if self.status == b"E" and not allowed_when_failed(words):
            raise InFailedTransaction("current transaction is aborted, commands ignored "
                                      "until end of transaction block")

    def failed(self) -> None:
        """A statement failed: inside a block the block fails."""
        if self.status == b"T":
            self.status = b"E"

    def execute(self, sql: str, session) -> StatementResult:
        """Run one block-control statement (its first word is in CONTROL); `session` is
        told about BEGIN / COMMIT / ROLLBACK so its own bookkeeping matches."""
        w = Words(sql)
        verb = w.next().text
        if verb in ("begin", "start"):
            if self.status != b"I":
                return StatementResult("BEGIN", notices=[
                    "WARNING: there is already a transaction in progress"])
            session.execute("BEGIN")
            self.status = b"T"
            self.savepoints.clear()
            return StatementResult("BEGIN")
        if verb == "savepoint":
            name = w.ident()
            if self.status == b"I":
                raise SqlError("SAVEPOINT can only be used in transaction blocks", "25P01")
            self.savepoints.append(name or "")
            return StatementResult("SAVEPOINT")
        if verb == "release":
            w.accept("savepoint")
            name = w.ident()
            if self.status == b"I":
                raise SqlError("RELEASE SAVEPOINT can only be used in transaction blocks",
                               "25P01")
            if name not in self.savepoints:
                raise SqlError(f'savepoint "{name}" does not exist', "3B001")
            del self.savepoints[self.savepoints.index(name):]
            return StatementResult("RELEASE")
        if verb in ("rollback", "abort"):
            w.accept_any("work", "transaction")
            if w.accept("to"):
                w.accept("savepoint")
                name = w.ident()
                if self.status == b"I":
                    raise SqlError("ROLLBACK TO SAVEPOINT can only be used in transaction "
                                   "blocks", "25P01")
                if name not in self.savepoints:
                    raise SqlError(f'savepoint "{name}" does not exist', "3B001")
                del self.savepoints[self.savepoints.index(name) + 1:]
                self.status = b"T"
                return StatementResult("ROLLBACK", notices=["WARNING: " + NOT_UNDONE])
            return self._end(session, "ROLLBACK")
        # commit / end
        return self._end(session, "ROLLBACK" if self.status == b"E" else "COMMIT")

    def _end(self, session, verb: str) -> StatementResult:
        if self.status == b"I":
            return StatementResult(verb, notices=[
                "WARNING: there is no transaction in progress"])
        r = session.execute(verb)
        self.status = b"I"
        self.savepoints.clear()
        notices = list(r[0].notices) if r else []
        if verb == "ROLLBACK":
            notices = ["WARNING: " + n if not n.startswith("WARNING") else n
                       for n in notices] or ["WARNING: " + NOT_UNDONE]
        return StatementResult(verb, notices=notices)
