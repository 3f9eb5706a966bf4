"""Session: one connection's state, and the dispatch of its statements by node type.

    s = db.session()                                  # session/database.py
    for result in s.execute("INSERT ...; SELECT ...", params): ...   # StatementResult each
    s.run(stmt, params, stream)                       # one front-door Statement

A SQL string may hold several statements separated by `;`; they run in order and the first
error stops the rest (PostgreSQL's simple-query behaviour). Each is parsed once, by the
dialect, when it runs (session/frontdoor.py); `run` then dispatches on its node's type:

    a handler the front end registered      `session.handlers[NodeType] = fn(stmt, params)`:
      (Session.handlers)                    the wire server runs the commands whose state is
                                            the connection's (settings, cursors, the
                                            transaction block, roles: wire/backend.py)
    KuduExplain                             planner.dispatch.explain
    KuduTransaction                         BEGIN / COMMIT / ROLLBACK (`transaction`)
    KuduSet, KuduReset                      the session's own settings (`_set`)
    KuduPrepare / KuduExecute / KuduDeallocate   SQL-level prepared statements
    KuduListen                              LISTEN / NOTIFY 0A000; UNLISTEN: nothing to do
    another session command                 0A000 `VERB is not supported` (SHOW a
                                            setting, COPY, DECLARE ... need a server)
    anything else                           planner.dispatch.execute (queries, INSERT and
                                            KuduUpsert, UPDATE, DELETE, DDL, SHOW TABLES...)

Names resolve through `planner.system_tables.SystemTables` wrapped around the catalog
(kudu_system.servers / .replicas), then the catalog the front end passed (the wire's adds
pg_catalog). With `db.metrics` set (`serve --http-port`, engine/metrics), `run` counts and
times every statement by command and outcome.

Errors are `planner.errors.SqlError` with a SQLSTATE and a 1-based position into the
*whole* string (session/errors.py). Per-row write failures do not raise here: they come
back in `StatementResult.row_errors` with the other rows applied (the DB-API turns them
into an IntegrityError / DataError carrying the list).

Parameters: `$1`, `$2`, ... (PostgreSQL) or `?` (in order), bound as typed constants. With
parameters, a statement the plan cache knows (planner/plan_cache.py: by text) runs without
being looked at again, and INSERT / UPSERT ... VALUES ($1, ...) go straight to the tablets
(`_bulk_insert`).

Stopping and limits: `Session.cancel()` (any thread) stops the running statement with 57014
within ~100 ms of work (planner/guard.py: every operator checks between morsels); each
statement gets a `QueryGuard` that also meters its intermediate Arrow data against the
session's `query_mem_limit` (53200 past it). The limit comes from `Database.open(...,
query_mem_limit=)` (default: a quarter of the machine's RAM) and `SET query_mem_limit = '2GB'`
changes it for the session (`'0'`: no limit; RESET / SET ... TO DEFAULT restores it).
`SET statement_timeout = '5s'` gives each statement a deadline, checked with the cancel
(57014 "canceling statement due to statement timeout"); the wire server keeps the setting
itself and arms a timer instead.
A cancel that comes when no statement runs is forgotten as the next one starts: `execute`
clears it, unless the front end marked the start itself (`reset_cancel()` when its user
saw the statement begin, then `execute(..., keep_cancel=True)` from the worker thread), so
that a Ctrl-C in between is not lost.

Prepared statements: `PREPARE name [(types)] AS ...` / `EXECUTE name (args)` /
`DEALLOCATE` keep `planner.dispatch.PreparedSql` in `Session.prepared` (docs/sql.md);
EXECUTE runs the statement with its arguments as parameters, through the plan cache.

Transactions: every statement is applied when it runs, row by row (Kudu has no multi-row
transactions). BEGIN / COMMIT are accepted; ROLLBACK is accepted with a warning notice that
the writes already applied stay applied - it never claims to undo them. READ ONLY
transactions and default_transaction_read_only are enforced here, for every front end
(`Session.access`, session/access_mode.py): a write is refused with 25006 before it runs -
in `run` and `execute_many`; the wire's fast paths call the same check.
"""

from __future__ import annotations

import contextlib
import threading
import time
from decimal import Decimal
from typing import Callable

import pyarrow as pa
from sqlglot import exp

from planner import dispatch, dml, query, rules
from planner.commands import (
    KuduCommand,
    KuduExplain,
    KuduListen,
    KuduReset,
    KuduSet,
    KuduShowSetting,
    KuduTransaction,
    KuduUpsert,
)
from planner.dialect import KuduDeallocate, KuduExecute, KuduPrepare
from planner.errors import FeatureNotSupported, SqlError
from planner.expr import session_time_zone, statement_clock, timezones
from planner.expr.float_text import session_float_digits
from planner.guard import QueryGuard, parse_bytes, parse_duration_ms
from planner.plan_cache import PlanCache
from planner.point_read import NOT_NOW
from planner.result import StatementResult
from planner.system_tables import SystemTables
from planner.utility import is_utility
from session.access_mode import AccessMode, parse_bool_setting
from session.errors import QueryCanceled, engine_errors_as_sql, sql_errors
from session.frontdoor import Statement, split_statements, statements

ROLLBACK_NOTICE = ("kudusql applies each statement when it runs (Kudu semantics): ROLLBACK "
                   "does not undo writes that were already applied")


def _ident(node) -> str:
    """An identifier's name as PostgreSQL folds it: unquoted lower-cased."""
    return node.name if getattr(node, "quoted", False) else node.name.lower()


Handler = Callable[[Statement, "list | None"], StatementResult]


_DECIMAL_OR_NULL = {Decimal, type(None)}


def _param_array(values: list, column_type: pa.DataType | None) -> pa.Array:
    """A batch's parameter values (`execute_many`'s `columns`) as the Arrow column
    `insert_rows` rounds into a column of `column_type`: `pa.array(values)`, or for a
    column of Decimals written to a DECIMAL column, the values converted to that type
    directly when every one fits it exactly (pa.array refuses a value that would need
    rounding or more digits, NaN, infinity: then the inferred column, rounded as before;
    all NULL: inferred, as pa.array types it).
    The same column either way - casting exact values changes nothing - without pa.array's
    per-value type inference (measured ~2 us a value, ~0.2 typed)."""
    kinds = set(map(type, values)) if column_type is not None and \
        pa.types.is_decimal(column_type) else ()
    if Decimal in kinds and kinds <= _DECIMAL_OR_NULL:   # (all NULL: inferred, null type)
        try:
            return pa.array(values, column_type)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            pass
    return pa.array(values)


class Session:
    """A connection's state. `cancel()` (from another thread) interrupts the running
    statement with 57014."""

    def __init__(self, db, catalog=None):
        self.db = db
        # kudu_system.servers / .replicas resolve in front of the catalog (planner/system_tables.py)
        self.catalog = SystemTables(catalog if catalog is not None else db.catalog, db)
        self.metrics = getattr(db, "metrics", None)  # engine.metrics.ServerMetrics (serve)
        self._plans = PlanCache()           # parameterised SELECTs, see planner/plan_cache
        # bumped whenever the cached plans are dropped (`set_time_zone`): see `point_read`
        self.plans_generation = 0
        self._insert_shapes: dict[str, tuple] = {}   # text -> parsed INSERT ... VALUES ($n)
        # (text, n) -> (catalog_version, its catalog, insert_row_target's answer)
        self._insert_targets: dict[tuple, tuple] = {}
        # the transaction block's access mode and default_transaction_read_only (READ ONLY
        # transactions: session/access_mode.py)
        self.access = AccessMode()
        self._cancel = threading.Event()
        self.query_mem_limit = db.query_mem_limit    # bytes, 0 = none (SET query_mem_limit)
        self.statement_timeout_ms = 0       # SET statement_timeout (0: none)
        # SET TIME ZONE: the zone timestamptz values are read and shown in (a front end
        # that runs SET itself, as the wire server does, calls `set_time_zone`)
        self.time_zone = "UTC"
        # extra_float_digits for `::text` of floats (the wire server hands its setting over)
        self.float_digits = 1
        self._deadline: float | None = None  # the running statement's (time.monotonic)
        # optimizer rules switched off by name (planner.rules.RULE_NAMES); set directly or
        # with SET kudusql.disabled_rules = 'name, ...' (the differential fuzzers use it)
        self.disabled_rules: frozenset[str] = frozenset()
        self.prepared: dict[str, dispatch.PreparedSql] = {}   # SQL-level PREPARE, by name
        # node type -> the front end's handler for it (it runs before the session's own)
        self.handlers: dict[type, Handler] = {}

    def cancel(self) -> None:
        self._cancel.set()

    def reset_cancel(self) -> None:
        """Forget a cancel that came after the statement it meant had ended (a front end
        calls it as its next statement starts)."""
        self._cancel.clear()

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            self._cancel.clear()
            raise QueryCanceled("canceling statement due to user request")
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self._deadline = None
            raise QueryCanceled("canceling statement due to statement timeout")

    def _guard(self) -> QueryGuard:
        """The running statement's cancel check and memory meter (planner/guard.py)."""
        return QueryGuard(self._check_cancel, self.query_mem_limit)

    # -- the front door ---------------------------------------------------------------------
    @staticmethod
    def statements(sql: str) -> list[Statement]:
        """The statements of a client's string (session/frontdoor.py), each parsed when it
        is first looked at."""
        return statements(sql)

    @staticmethod
    def single_statement(sql: str) -> Statement:
        """`sql` as one statement (the wire's Parse message): 42601 if it holds more."""
        body = sql.strip().rstrip(";")
        if ";" in body and len(split_statements(sql)) > 1:
            raise SqlError("cannot insert multiple commands into a prepared statement",
                           "42601")
        return Statement(sql)

    def execute(self, sql: str, params=None, keep_cancel: bool = False
                ) -> list[StatementResult]:
        """Run every statement in `sql`; see the module docstring (`keep_cancel`: a
        cancel already asked for applies to this call, see Stopping)."""
        return list(self.execute_iter(sql, params, stream=False, keep_cancel=keep_cancel))

    def execute_iter(self, sql: str, params=None, stream: bool = True,
                     keep_cancel: bool = False):
        """Like `execute`, one result at a time: a statement runs when its result is asked
        for. With `stream`, SELECT results stream their rows (`StatementResult.stream`);
        consume each before asking for the next, since later statements may write."""
        if not keep_cancel:
            self._cancel.clear()
        stmts = statements(sql)
        if params and len(stmts) > 1:
            raise SqlError("cannot insert multiple commands into a prepared statement", "42601")
        for stmt in stmts:
            with sql_errors(stmt.offset):
                r = self.run(stmt, params, stream=stream)
            yield r

    def execute_one(self, text: str, params=None, stream: bool = False) -> StatementResult:
        """One statement's text (see `run`)."""
        return self.run(Statement(text), params, stream)

    def run(self, stmt: Statement, params=None, stream: bool = False) -> StatementResult:
        """Run one statement; engine errors come out as SqlError with their SQLSTATE and
        positions in `stmt.text` (the caller adds `stmt.offset`)."""
        # the session's rule switches, else whatever a caller's rules.disabled_rules block
        # set for this thread
        switches = rules.disabled_rules(self.disabled_rules) if self.disabled_rules else \
            contextlib.nullcontext()
        t0 = time.perf_counter()
        # the statement's clock for SET statement_timeout: checked with the cancel, between
        # morsels (the wire server arms its own timer; its sessions keep 0 here)
        ms = self.statement_timeout_ms
        self._deadline = time.monotonic() + ms / 1000 if ms else None
        try:
            with sql_errors(), switches, statement_clock(), session_time_zone(self.time_zone), \
                    session_float_digits(self.float_digits):
                r = self._run(stmt, params, stream)
        except Exception as e:
            if self.metrics is not None:
                self.metrics.statement(stmt.text.lstrip()[:16].split(None, 1)[0] if
                                       stmt.text.strip() else "EMPTY",
                                       time.perf_counter() - t0, None,
                                       getattr(e, "sqlstate", None) or "XX000")
            raise
        if self.metrics is not None:  # rows affected by writes; refused rows fail the
            self.metrics.statement(r.command, time.perf_counter() - t0,   # statement (wire)
                                   r.rowcount if r.command != "SELECT" else None,
                                   r.row_errors[0].sqlstate if r.row_errors else None)
        if r.stream is not None:
            r.stream = engine_errors_as_sql(r.stream)
        return r

    def _run(self, stmt: Statement, params, stream: bool) -> StatementResult:
        text = stmt.text
        if self.access.needs_check():
            self.access.check(stmt)     # READ ONLY: 25006 before anything is written
        if params:
            # by text, before the node is looked at: a statement the plan cache knows
            fast = self._plans.point_read(self.catalog, text, params)
            if fast is not None:
                # plain columns by a plain key, the tablet pinned: a PointResult carrying
                # the row (the DB-API takes its tuple, no Arrow); else the compiled read
                r = fast.read_plain(params)
                if r is not None and r is not NOT_NOW:
                    return r
                t = fast.run(self.catalog, params, fast.facade(self.catalog))
                if t is not None:
                    return StatementResult.rows("SELECT", t)
            out = self._plans.lookup(self.catalog, text, params)
            if out is not None:
                return query.run_cached(self.catalog, out, stream, self._guard())
            r = self._bulk_insert(stmt, [params])
            if r is not None:
                return r
        node = stmt.node
        if node is None:
            return StatementResult("EMPTY")
        handler = self.handlers.get(type(node))
        if handler is not None:
            return handler(stmt, params)
        if isinstance(node, KuduCommand):
            return self._command(stmt, params, stream)
        if isinstance(node, (KuduPrepare, KuduExecute, KuduDeallocate)):
            return self._prepared_statement(stmt, stream)
        # UPDATE / DELETE only read their node (planner.dml `update` / `delete`): the parse
        # cache's shared node as it is, without the deep copy a layer that may change it
        # gets (tens of microseconds per single-row write)
        ast = node if isinstance(node, (exp.Update, exp.Delete)) else stmt.ast()
        return dispatch.execute(self.catalog, ast, text, params,
                                 upsert=isinstance(node, KuduUpsert),
                                 check_cancel=self._guard(), stream=stream,
                                 cache=self._plans)

    def _command(self, stmt: Statement, params, stream: bool) -> StatementResult:
        """The session commands the session runs itself (planner/commands.py)."""
        node = stmt.node
        if isinstance(node, KuduExplain):
            with sql_errors(node.args["offset"]):
                return dispatch.explain(self.catalog, node.this.copy(), node.args["inner"],
                                         params, node.args["analyze"], self._guard())
        if isinstance(node, KuduTransaction) and node.verb in ("BEGIN", "COMMIT", "ROLLBACK",
                                                               "ROLLBACK TO"):
            return self.transaction(node.verb.split()[0], node.args.get("read_only"))
        if isinstance(node, KuduSet):
            return StatementResult("SET", notices=self._set(node))
        if isinstance(node, KuduReset):     # RESET name: its default; RESET ALL: all of them
            # (disabled_rules too, though a caller may have set it directly)
            names = [node.args["name"]] if node.args.get("name") else \
                ["query_mem_limit", "statement_timeout", "kudusql.disabled_rules", "timezone",
                 "default_transaction_read_only"]
            for name in names:
                self._set(KuduSet(name=name))
            return StatementResult("RESET")
        if isinstance(node, KuduShowSetting) and (node.args.get("name") or "").lower() in (
                "timezone", "time zone"):
            return StatementResult.rows("SHOW", pa.table({"TimeZone": [self.time_zone]}))
        if isinstance(node, KuduListen) and node.verb == "UNLISTEN":
            return StatementResult("UNLISTEN")     # nothing is ever listened to
        word = node.args.get("word") or node.verb.split()[0]
        raise FeatureNotSupported(f"{word} is not supported", position=1)

    @property
    def in_transaction(self) -> bool:
        return self.access.in_block

    def transaction(self, verb: str, read_only: bool | None = None) -> StatementResult:
        """BEGIN [READ ONLY | READ WRITE] / COMMIT / ROLLBACK as the session sees them:
        nothing to undo or commit (each statement was applied when it ran); ROLLBACK
        says so in a notice. BEGIN sets the block's access mode (`read_only`; None: the
        default_transaction_read_only in force)."""
        if verb == "BEGIN":
            self.access.begin(read_only)
            return StatementResult("BEGIN")
        self.access.end()
        if verb == "COMMIT":
            return StatementResult("COMMIT")
        return StatementResult("ROLLBACK", notices=[ROLLBACK_NOTICE])

    def _set(self, node: KuduSet) -> list[str]:
        """The settings the embedded session acts on: SET query_mem_limit = '2GB' | DEFAULT,
        SET statement_timeout = '5s' | 0 | DEFAULT (57014 "due to statement timeout" past
        it), SET kudusql.disabled_rules = 'name, ...' | DEFAULT, the access modes (SET
        default_transaction_read_only, SET SESSION CHARACTERISTICS AS TRANSACTION READ
        ONLY, SET TRANSACTION READ ONLY, SET transaction_read_only); other settings are
        accepted and ignored (the wire server keeps its own, wire.settings). Returns the
        notices."""
        if node.args.get("noop"):
            return []
        name = (node.args.get("name") or "").lower()
        value = node.args.get("value")
        default = value is None or value.lower() == "default"
        if name == "default_transaction_read_only":
            self.access.set_default(not default and parse_bool_setting(name, value))
        elif name == "transaction_read_only":
            on = not default and parse_bool_setting(name, value)
            return self.access.set_read_only(on, node.verb == "SET TRANSACTION")
        elif name == "query_mem_limit":
            self.query_mem_limit = self.db.query_mem_limit if default else parse_bytes(value)
        elif name == "statement_timeout":
            self.statement_timeout_ms = 0 if default else parse_duration_ms(value)
        elif name in ("timezone", "time zone"):
            self.set_time_zone("UTC" if default else value)
        elif name == "kudusql.disabled_rules":
            self.disabled_rules = rules.check_rule_names(
                [] if value is None else value.split(","))
        return []

    def set_time_zone(self, name: str) -> None:
        """The session's TimeZone (PostgreSQL's name as written: 'America/New_York',
        'UTC', '+02'), checked as SET TIME ZONE checks it (22023 `invalid value for
        parameter "TimeZone"`). Statements run in it from the next one on. A front end
        that keeps its own settings (the wire server, wire/backend.py) calls this whenever
        its TimeZone changes. Cached plans are dropped when the zone changes: folding
        bakes the zone into constants (timestamptz literals read as local times, casts
        to text or timestamp, date_trunc), and which plans did is not tracked - a zone
        change is rare next to the statements it serves."""
        if name == self.time_zone:
            return                  # the common case: a front end handing it on each statement
        zone = timezones.check_setting(name)
        if zone != self.time_zone:
            self.time_zone = zone
            self._plans = PlanCache()
            self.plans_generation += 1

    # -- describing ---------------------------------------------------------------------------
    def describe(self, sql: str | Statement):
        """(parameter types, result schema) of one statement without running it: the wire
        protocol's ParameterDescription and RowDescription. Types are Arrow types; a
        parameter type is None when nothing in the statement implies one; the schema is None
        for statements that return no rows."""
        if isinstance(sql, Statement):
            stmt = sql
        else:
            stmts = statements(sql)
            if len(stmts) != 1:
                if not stmts:
                    return [], None
                raise SqlError("cannot insert multiple commands into a prepared statement",
                               "42601")
            stmt = stmts[0]
        with sql_errors(stmt.offset):
            node = stmt.node
            if node is None:
                return [], None
            if isinstance(node, KuduExplain):
                params = dispatch.parameter_types(self.catalog, node.this.copy())
                return params, pa.schema([pa.field("QUERY PLAN", pa.string())])
            if isinstance(node, (KuduCommand, KuduPrepare, KuduDeallocate)):
                return [], None
            if isinstance(node, KuduExecute):
                p = self.prepared.get(_ident(node.this))
                if p is None:
                    raise SqlError(f'prepared statement "{_ident(node.this)}" does not exist',
                                   "26000")
                inner = Statement(p.text).ast()
                if not isinstance(inner, query.QUERY_TYPES):
                    return [], None
                params = [pa.scalar(None, t if t is not None else pa.null()) for t in p.types]
                return [], dispatch.describe_query(self.catalog, inner, p.text, params)
            if is_utility(node):
                return [], self._utility_schema(stmt)
            return dispatch.describe(self.catalog, stmt.ast(), stmt.text)

    def _utility_schema(self, stmt: Statement):
        """SHOW / DESCRIBE return rows: their schema is that of running them (cheap)."""
        if isinstance(stmt.node, (exp.Create, exp.Drop, exp.Alter, exp.Comment)):
            return None
        r = dispatch.execute(self.catalog, stmt.ast(), stmt.text)
        return r.table.schema if r.table is not None else None

    # -- prepared statements -----------------------------------------------------------------
    def _prepared_statement(self, stmt: Statement, stream: bool) -> StatementResult:
        """PREPARE / EXECUTE / DEALLOCATE: the session's named statements (PostgreSQL's
        SQL-level prepared statements). EXECUTE runs the statement text with its arguments
        as parameters, so a query goes through the plan cache as a Bind would."""
        ast, text = stmt.node, stmt.text
        if isinstance(ast, KuduDeallocate):
            if ast.this is None:
                self.prepared.clear()
                return StatementResult("DEALLOCATE ALL")
            name = _ident(ast.this)
            if self.prepared.pop(name, None) is None:
                raise SqlError(f'prepared statement "{name}" does not exist', "26000")
            return StatementResult("DEALLOCATE")
        name = _ident(ast.this)
        if isinstance(ast, KuduPrepare):
            if name in self.prepared:
                raise SqlError(f'prepared statement "{name}" already exists', "42P05")
            self.prepared[name] = dispatch.prepare(self.catalog, stmt.ast(), text, name)
            return StatementResult("PREPARE")
        p = self.prepared.get(name)
        if p is None:
            raise SqlError(f'prepared statement "{name}" does not exist', "26000")
        params = dispatch.execute_arguments(self.catalog, p, ast, text)
        try:
            return self._run(Statement(p.text), params or None, stream)
        except SqlError as e:
            e.position = None        # a position in the PREPAREd text, not in this one
            raise

    # -- many rows at once ---------------------------------------------------------------------
    def execute_many(self, sql: str, param_sets: list[list] | None, in_order: bool = False,
                     columns: list | None = None) -> StatementResult | None:
        """`INSERT/UPSERT ... VALUES ($1, ..., $n)` for many parameter sets as one Arrow
        batch (one write per tablet instead of one statement per set); row ordinals in
        errors are the parameter sets' 1-based positions. None when the statement has
        another shape (the caller then runs the sets one by one). `in_order`: the sets
        apply up to the first that fails (`rowcount` of them), none after it; the wire
        server's pipelined batches (wire/fastpath.py) then run the failing one alone.
        `columns` instead of `param_sets`: the values by parameter, each a pyarrow Array
        or a list (what `pa.array` makes of the sets' values)."""
        stmts = statements(sql)
        if len(stmts) != 1 or not (param_sets or columns):
            return None
        # the session's TimeZone: a timestamptz into a TIMESTAMP column is its local time
        with sql_errors(stmts[0].offset), session_time_zone(self.time_zone):
            self.access.check(stmts[0])     # READ ONLY: 25006 before anything is written
            return self._bulk_insert(stmts[0], param_sets, in_order, columns)

    def insert_row_target(self, text: str, n: int):
        """(InsertTarget, target column names, upsert) when `text` is a plain `INSERT /
        UPSERT INTO t [(cols)] VALUES ($1, ..., $n)` (no RETURNING, no ON CONFLICT) of
        `n` parameters, else None (nothing done). What a front end needs to write one
        row of parameter values itself, the values being exactly what binding the
        statement would give them: the wire's single-row INSERT (wire/fastpath.py), which
        writes them on the small-write path (`Table.write_small_deferred`: a value it
        does not take with certainty sends the statement the ordinary way) and reports
        failed rows as `planner.dml.row_failures` does. A statement-level error (a
        column that does not exist, ...) is None too: the ordinary path reports it.
        Kept per text and `n` while the catalog's `catalog_version` is unchanged (every
        DDL changes it; what this resolves - the table, its declared columns, views - is
        the catalog's): a single-row INSERT workload asks for the same one every time."""
        source = self.catalog.catalog_source
        version = getattr(source, "catalog_version", None)
        key = (text, n)
        kept = self._insert_targets.get(key)
        if kept is not None and version is not None and kept[0] == version and \
                kept[1] is source:
            return kept[2]
        found = self._resolve_insert_row_target(text, n)
        if version is not None:
            if len(self._insert_targets) > 256:
                self._insert_targets.clear()
            self._insert_targets[key] = (version, source, found)
        return found

    def _resolve_insert_row_target(self, text: str, n: int):
        """`insert_row_target` resolved afresh."""
        stmts = statements(text)
        if len(stmts) != 1:
            return None
        ast, count, upsert = self._insert_shape(stmts[0])
        if ast is None or count != n or ast.args.get("returning") is not None:
            return None
        try:
            with sql_errors():
                target = dml.insert_target(self.catalog, ast, text)
                if target.ignore_dups:
                    return None
                cols = dml.insert_columns(target, n, text, ast.expression)
        except SqlError:
            return None
        return target, cols, upsert

    def _insert_shape(self, stmt: Statement) -> tuple:
        """(ast, n, upsert) of an `INSERT ... VALUES ($1..$n)`, else (None, None, None);
        kept per statement text."""
        text = stmt.text
        shape = self._insert_shapes.get(text)
        if shape is None:
            try:
                ast = stmt.node
            except SqlError:
                ast = None
            n = dml.bulk_parameters(ast) if ast is not None else None
            # the AST is only read from here on (insert_target, insert_rows)
            shape = (ast, n, isinstance(ast, KuduUpsert)) if n is not None \
                else (None, None, None)
            if len(self._insert_shapes) > 256:
                self._insert_shapes.clear()
            self._insert_shapes[text] = shape
        return shape

    def _bulk_insert(self, stmt: Statement, param_sets, in_order: bool = False,
                     columns: list | None = None) -> StatementResult | None:
        """The INSERT ... VALUES ($1..$n) path without binding (see execute_many); its
        shape is kept per statement text. None for other statements."""
        text = stmt.text
        ast, n, upsert = self._insert_shape(stmt)
        if ast is None or (len(columns) != n if columns is not None else
                           any(len(p) != n for p in param_sets)):
            return None
        try:
            if columns is not None:
                types = None
                arrays = []
                for i, c in enumerate(columns):     # a loop per column
                    if not isinstance(c, pa.Array):
                        if types is None:
                            types = self._target_types(ast, text, n)
                        c = _param_array(c, types[i] if types else None)
                    arrays.append(c)
                columns = arrays
            else:
                columns = [pa.array([p[i].as_py() if isinstance(p[i], pa.Scalar) else p[i]
                                     for p in param_sets]) for i in range(n)]
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            return None        # values pyarrow cannot type as one column: the slow path
        target = dml.insert_target(self.catalog, ast, text)
        if in_order and target.ignore_dups:
            return None
        rows = pa.Table.from_arrays(columns, names=[f"c{i}" for i in range(n)])
        return dml.insert_rows(target, rows, upsert, text, ast.expression, in_order)

    def _target_types(self, ast, text: str, n: int) -> list | None:
        """The Arrow types of the columns an `INSERT ... VALUES ($1..$n)` writes its n
        parameters to, or None when the statement does not resolve (`insert_rows` then
        reports why)."""
        try:
            target = dml.insert_target(self.catalog, ast, text)
            cols = dml.insert_columns(target, n, text, ast.expression)
        except SqlError:
            return None
        schema = target.table.schema
        return [schema.column(c).arrow_type for c in cols]

    def execute_point(self, text: str, params) -> StatementResult | None:
        """The statement's result if it is a cached primary-key point read whose tablets are
        open (bounded, in-memory work: the wire server runs it on its event loop), else
        None without doing anything; see planner.point_read. Its select list is evaluated
        as `execute` evaluates it: one statement time, the session's TimeZone (a cast to
        timestamptz or text reads the zone when it runs, not when it was planned). Plain
        columns read by a key of plain values (`PointRead.read_plain`) read neither, and
        run without setting them up; an error there is reported by running the read
        again under the session's error boundary (a read: nothing to undo)."""
        if not params:
            return None
        try:
            fast = self._plans.point_read(self.catalog, text, params)
            if fast is None:
                return None
            # plain columns and a key of plain values (`PointRead.read_plain`): nothing
            # here reads the statement's time or zone, so no clock or zone is set up
            r = fast.read_plain(params)
            if r is NOT_NOW:
                return None
            if r is not None:
                return r        # a PointResult: its table made only if asked for
        except Exception:  # noqa: BLE001 - a read: run again below, whose boundary reports it
            pass
        with sql_errors(), statement_clock(), session_time_zone(self.time_zone):
            t = self._plans.point_result(self.catalog, text, params, in_memory_only=True)
        return None if t is None else StatementResult.rows("SELECT", t)

    def key_write_rows(self, text: str, params, read_ts: list | None = None):
        """(rows, table) for `text`, a prepared UPDATE / DELETE by the full primary key run
        before (its row-matching query cached as a point read, planner.dml
        `_matching`), with these parameters: the matching query's result (0 or 1 row: the
        key columns, then the SET values) and the table; None (nothing done) when there is
        no such cached point read, its tablets are not all open or its lookup would wait
        (`Table.lookup_now`). A read: the wire's key-write fast path (wire/fastpath.py)
        then writes the row itself. The SET values are evaluated as `execute` evaluates
        them (one statement time, the session's TimeZone). `read_ts` (a list): the
        timestamp S the row was read at is appended to it (`Table.lookup_now`): the read
        precondition of the write made of it."""
        if not params:
            return None
        fast = self._plans.point_read(self.catalog, dml.MATCHING_KEY + text, params)
        if fast is None:
            return None
        table = fast.facade(self.catalog)
        if not fast.ready(table):
            return None
        with sql_errors(), statement_clock(), session_time_zone(self.time_zone):
            rows = fast.run(self.catalog, params, table, now=True,   # never waits
                            read_ts=read_ts)
        return None if rows is None else (rows, table)

    def key_write_values(self, text: str, params, read_ts: list | None = None):
        """`key_write_rows` in plain Python values: (row, table) with row the matching
        query's one row as a tuple (the key columns, then the SET values) or
        `planner.point_read.NO_ROW` when no row matches; None (nothing done) when there is
        no such cached point read, its lookup would wait (`Table.lookup_now`: a tablet not
        open, an ALTER under way), or its items need the executor (`PointRead.values`:
        then `key_write_rows`). Bounded in-memory work: the wire runs it on its loop.
        `read_ts`: as `key_write_rows`'s."""
        if not params:
            return None
        fast = self._plans.point_read(self.catalog, dml.MATCHING_KEY + text, params)
        if fast is None or fast.value_items is None:
            return None
        table = fast.facade(self.catalog)
        with sql_errors(), session_time_zone(self.time_zone):   # the key's conversion
            row = fast.values(params, table, read_ts)
        return None if row is None else (row, table)

    def point_read_source(self):
        """The catalog whose `catalog_version` numbers what `point_read` resolves (None
        in its `catalog_version`: keep nothing, ask each time)."""
        return self.catalog.catalog_source

    def point_read(self, text: str, params):
        """(PointRead, table) when `text` with these parameters is a cached primary-key
        point read of plain columns, else None (nothing done): the wire server's fast path
        (wire/fastpath.py) reads its row with `table.lookup_now` (on the event loop: it
        declines what would wait) without building a result table. See
        planner.point_read.

        The answer stays the answer for the same text and parameter types while
        `plans_generation` and the `catalog_version` of `point_read_source()` are
        unchanged (what the plan cache's own check reads: any DDL, and a TimeZone change,
        changes one of them), so a caller may keep it and skip this call (the wire's
        prepared point read does); a catalog without `catalog_version` gives no such
        promise."""
        if not params:
            return None
        fast = self._plans.point_read(self.catalog, text, params)
        if fast is None or fast.plain is None:
            return None
        return fast, fast.facade(self.catalog)
