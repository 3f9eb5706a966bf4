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
- Read-only transactions are PostgreSQL's, and the session's (session/access_mode.py,
  `Session.access`: one place for every front end): the block's access mode and
  default_transaction_read_only live there, BEGIN hands the mode to `Session.transaction`,
  and `check` calls the session's check, so the wire's fast paths, which call it before
  they write, refuse (25006) or decline as the ordinary path does.
"""

from __future__ import annotations

from planner.errors import SqlError
from planner.result import StatementResult
from planner.commands import KuduTransaction

NOT_UNDONE = ("kudusql applies each statement when it runs (Kudu semantics): ROLLBACK does "
              "not undo writes that were already applied")


class InFailedTransaction(SqlError):
    sqlstate = "25P02"


def allowed_when_failed(stmt) -> bool:
    """ROLLBACK / ABORT / COMMIT / END / ROLLBACK TO end a failed block; `stmt` a
    front-door Statement (session/frontdoor.py; one that does not parse is refused too)."""
    try:
        node = stmt.node
    except SqlError:
        return False
    return isinstance(node, KuduTransaction) and node.verb in ("ROLLBACK", "ROLLBACK TO",
                                                               "COMMIT")


class TransactionState:
    def __init__(self, access_of) -> None:
        """`access_of()`: the connection's session's AccessMode (session/access_mode.py)."""
        self.status = b"I"
        self.savepoints: list[str] = []
        self.access_of = access_of

    @property
    def read_only(self) -> bool:
        """transaction_read_only: the block's mode, outside one the default's."""
        return self.access_of().read_only

    def set_read_only(self, on: bool, sql_transaction: bool) -> list[str]:
        """SET TRANSACTION READ ONLY / WRITE, SET transaction_read_only (the session's
        `AccessMode.set_read_only`: its notices; 25001 for READ WRITE too late)."""
        return self.access_of().set_read_only(on, sql_transaction)

    @property
    def in_block(self) -> bool:
        return self.status != b"I"

    def check(self, stmt) -> None:
        """25P02 for a statement a failed block refuses (the statement is looked at only
        then); 25006 for a write in read-only mode (the session's check)."""
        if self.status == b"E" and not allowed_when_failed(stmt):
            raise InFailedTransaction("current transaction is aborted, commands ignored "
                                      "until end of transaction block")
        self.access_of().check(stmt)    # READ ONLY (25006); the block ran a statement

    def failed(self) -> None:
        """A statement failed: inside a block the block fails."""
        if self.status == b"T":
            self.status = b"E"

    def execute(self, node: KuduTransaction, session) -> StatementResult:
        """Run one block-control statement; `session` is told about BEGIN / COMMIT /
        ROLLBACK (`Session.transaction`) so its own bookkeeping matches."""
        verb, name = node.verb, node.args.get("name")
        if verb == "BEGIN":
            if self.status != b"I":
                return StatementResult("BEGIN", notices=[
                    "WARNING: there is already a transaction in progress"])
            session.transaction("BEGIN", node.args.get("read_only"))
            self.status = b"T"
            self.savepoints.clear()
            # PostgreSQL's command tag names the statement as written
            return StatementResult("START TRANSACTION" if node.args.get("word") == "START"
                                   else "BEGIN")
        if verb == "SAVEPOINT":
            if self.status == b"I":
                raise SqlError("SAVEPOINT can only be used in transaction blocks", "25P01")
            self.savepoints.append(name or "")
            return StatementResult("SAVEPOINT")
        if verb == "RELEASE":
            if self.status == b"I":
                raise SqlError("RELEASE SAVEPOINT can only be used in transaction blocks",
                               "25P01")
            if name not in self.savepoints:
                raise SqlError(f'savepoint "{name}" does not exist', "3B001")
            del self.savepoints[self.savepoints.index(name):]
            return StatementResult("RELEASE")
        if verb == "ROLLBACK TO":
            if self.status == b"I":
                raise SqlError("ROLLBACK TO SAVEPOINT can only be used in transaction "
                               "blocks", "25P01")
            if name not in self.savepoints:
                raise SqlError(f'savepoint "{name}" does not exist', "3B001")
            del self.savepoints[self.savepoints.index(name) + 1:]
            self.status = b"T"
            return StatementResult("ROLLBACK", notices=["WARNING: " + NOT_UNDONE])
        if verb == "ROLLBACK":
            return self._end(session, "ROLLBACK")
        # commit / end
        return self._end(session, "ROLLBACK" if self.status == b"E" else "COMMIT")

    def _end(self, session, verb: str) -> StatementResult:
        if self.status == b"I":
            return StatementResult(verb, notices=[
                "WARNING: there is no transaction in progress"])
        r = session.transaction(verb)
        self.status = b"I"
        self.savepoints.clear()
        notices = list(r.notices)
        if verb == "ROLLBACK":
            notices = ["WARNING: " + n if not n.startswith("WARNING") else n
                       for n in notices] or ["WARNING: " + NOT_UNDONE]
        return StatementResult(verb, notices=notices)
