"""READ ONLY transactions, enforced where statements run, for every front end.

PostgreSQL's access modes: a statement that writes (`Statement.write_tag`: INSERT, UPDATE,
DELETE, UPSERT, COPY FROM, DDL, roles) is refused with 25006 `cannot execute <tag> in a
read-only transaction` when

- the transaction block is read only: BEGIN / START TRANSACTION READ ONLY, SET TRANSACTION
  READ ONLY or SET transaction_read_only = on inside it, or a block begun while
  default_transaction_read_only is on; or
- outside a block, default_transaction_read_only is on (SET default_transaction_read_only,
  SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY, a startup option).

One `AccessMode` per session (`Session.access`) holds the mode and makes the check
(`check`): `Session` calls it before it runs a statement, bulk-inserts parameter sets
(`execute_many`) or anything else that writes, so the DB-API driver and the shell get it
from the session itself; the wire server's transaction block (wire/transaction.py) calls
the same `check` before its fast paths, which write without going through `Session.run`,
and keeps its ReadyForQuery status and savepoints itself. A front end that keeps its own
settings (the wire server) points `default_of` at them (an object with a
`default_read_only` flag it keeps up to date), so the two never disagree.

SET TRANSACTION READ WRITE after a statement ran in a read-only block is 25001 ("must be
set before any query"); outside a block SET TRANSACTION warns and changes nothing, as in
PostgreSQL.
"""

from __future__ import annotations

from planner.commands import KuduSet, KuduShowSetting, KuduTransaction
from planner.errors import SqlError

_BOOL_WORDS = {"on": True, "true": True, "yes": True, "1": True, "t": True, "y": True,
               "off": False, "false": False, "no": False, "0": False, "f": False, "n": False}


class ReadOnlyTransaction(SqlError):
    sqlstate = "25006"


def parse_bool_setting(key: str, value: str) -> bool:
    """A Boolean setting's value as PostgreSQL reads it (on/off, true/false, yes/no, 1/0,
    t/f, y/n); 22023 otherwise."""
    v = _BOOL_WORDS.get(value.strip().strip("'").lower())
    if v is None:
        raise SqlError(f'parameter "{key}" requires a Boolean value', "22023")
    return v


class AccessMode:
    """One session's access mode (module docstring)."""

    def __init__(self) -> None:
        self.in_block = False           # BEGIN seen, COMMIT / ROLLBACK not yet
        self.block_read_only = False    # the block's mode (in a block)
        self.block_ran = False          # a statement ran in the block (not SET / BEGIN)
        # where default_transaction_read_only is kept: an object whose `default_read_only`
        # says it - this one (embedded: `set_default`), or the front end's own settings
        # (the wire's wire.settings.Settings keeps the attribute up to date)
        self.default_of = self
        self.default_read_only = False

    def set_default(self, on: bool) -> None:
        self.default_read_only = on

    @property
    def read_only(self) -> bool:
        """transaction_read_only: the block's mode, outside one the default's."""
        return self.block_read_only if self.in_block else self.default_of.default_read_only

    def needs_check(self) -> bool:
        """Whether `check` has anything to do before a statement (cheap: run for every
        statement)."""
        if self.in_block:
            return self.block_read_only or not self.block_ran
        return self.default_of.default_read_only

    def begin(self, read_only: bool | None) -> None:
        """BEGIN [READ ONLY | READ WRITE] (None: the default's mode)."""
        self.in_block = True
        self.block_read_only = self.default_of.default_read_only if read_only is None \
            else read_only
        self.block_ran = False

    def end(self) -> None:
        self.in_block = False
        self.block_read_only = False
        self.block_ran = False

    def set_read_only(self, on: bool, sql_transaction: bool) -> list[str]:
        """SET TRANSACTION READ ONLY / WRITE, SET transaction_read_only: the block's mode
        (returns its notices); outside a block it changes nothing (SET TRANSACTION warns).
        25001 for READ WRITE after a statement ran in a read-only block."""
        if not self.in_block:
            return ["WARNING: SET TRANSACTION can only be used in transaction blocks"] \
                if sql_transaction else []
        if not on and self.block_read_only and self.block_ran:
            raise SqlError("transaction read-write mode must be set before any query",
                           "25001")
        self.block_read_only = on
        return []

    def check(self, stmt) -> None:
        """Before `stmt` (a front-door Statement) runs: note that the block ran a
        statement, and refuse a write in read-only mode (25006). Looks at the statement
        only when it has to (in a block's first statement, or read only)."""
        if self.in_block and not self.block_ran:
            try:
                node = stmt.node
            except SqlError:
                node = None
            self.block_ran = not isinstance(node, (KuduTransaction, KuduSet,
                                                   KuduShowSetting))
        if self.read_only:
            tag = stmt.write_tag()
            if tag is not None:
                raise ReadOnlyTransaction(f"cannot execute {tag} in a read-only "
                                          "transaction")
