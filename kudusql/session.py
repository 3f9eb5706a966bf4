"""Database and Session: the one entry point of the wire server, the DB-API driver, the shell
and the TPC-H runner.

    db = Database.open("data-dir")          # catalog + maintenance manager thread
    s = db.session()
    for result in s.execute("INSERT ...; SELECT ...", params): ...   # StatementResult each
    db.close()

A SQL string may hold several statements separated by `;`; they run in order and the first
error stops the rest (PostgreSQL's simple-query behaviour). Errors are `planner.errors.SqlError`
with a SQLSTATE and a 1-based position into the *whole* string. Per-row write failures do not
raise here: they come back in `StatementResult.row_errors` with the other rows applied (the
DB-API turns them into an IntegrityError / DataError carrying the list).

Parameters: `$1`, `$2`, ... (PostgreSQL) or `?` (in order), bound as typed constants.

Stopping and limits: `Session.cancel()` (any thread) stops the running statement with 57014
within ~100 ms of work (planner/guard.py: every operator checks between morsels); each
statement gets a `QueryGuard` that also meters its intermediate Arrow data against the
session's `query_mem_limit` (53200 past it). The limit comes from `Database.open(...,
query_mem_limit=)` (default: a quarter of the machine's RAM) and `SET query_mem_limit = '2GB'`
changes it for the session (`'0'`: no limit; RESET / SET ... TO DEFAULT restores it).

Prepared statements: `PREPARE name [(types)] AS ...` / `EXECUTE name (args)` /
`DEALLOCATE` keep `planner.statement.PreparedSql` in `Session.prepared` (docs/sql.md);
EXECUTE runs the statement with its arguments as parameters, through the plan cache.

Transactions: every statement is applied when it runs, row by row (Kudu has no multi-row
transactions). BEGIN / COMMIT are accepted; ROLLBACK is accepted with a warning notice that
the writes already applied stay applied - it never claims to undo them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading

import pyarrow as pa
from sqlglot import exp
from sqlglot.tokens import TokenType

from engine import errors as engine_errors
from engine.catalog import Catalog
from engine.tablet.maintenance_manager import MaintenanceManager
from planner import rules, statement
from planner.ddl import parse
from planner.dialect import KuduDeallocate, KuduExecute, KuduPrepare, KuduSQL, syntax_error
from planner.errors import SqlError, SqlSyntaxError
from planner.guard import QueryGuard, default_query_mem_limit, parse_bytes
from planner.plan_cache import PlanCache
from planner.result import StatementResult

_EXPLAIN = re.compile(r"^\s*explain\b\s*(?:\(\s*([a-z_,\s]*)\)|((?:\s*(?:analyze|analyse|verbose)"
                      r"\b)*))", re.I)


_log = logging.getLogger("kudusql.session")


class QueryCanceled(SqlError):
    sqlstate = "57014"


@functools.lru_cache(maxsize=1024)
def split_statements(sql: str) -> tuple[tuple[int, str], ...]:
    """(offset, text) of each statement in `sql` (split at top-level semicolons); cached,
    since clients send the same statement texts again and again."""
    try:
        tokens = KuduSQL().tokenize(sql)
    except Exception as e:  # noqa: BLE001 - sqlglot's TokenError: an unterminated string...
        raise syntax_error(sql, e) from None
    out = []
    seg_start = None
    for t in tokens:
        if t.token_type == TokenType.SEMICOLON:
            if seg_start is not None:
                out.append((seg_start, sql[seg_start:t.start].rstrip()))
            seg_start = None
        elif seg_start is None:
            seg_start = t.start
    if seg_start is not None:
        out.append((seg_start, sql[seg_start:].rstrip()))
    return tuple(out)


class InternalError(SqlError):
    """A failure that is a bug in kudusql (an exception no layer turned into a SQL error):
    the statement fails with XX000 in SQL's words; the traceback goes to the log."""
    sqlstate = "XX000"


INTERNAL_ERROR_MESSAGE = ("internal error: the statement failed unexpectedly (a bug in "
                          "kudusql; the server log has the details)")


def _ident(node) -> str:
    """An identifier's name as PostgreSQL folds it: unquoted lower-cased."""
    return node.name if getattr(node, "quoted", False) else node.name.lower()


@contextlib.contextmanager
def _sql_errors(offset: int = 0):
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


def _engine_errors_as_sql(batches):
    with _sql_errors():
        yield from batches


class Database:
    """One data directory: the catalog (tables, tablets) and the maintenance thread."""

    def __init__(self, catalog: Catalog, maintenance: MaintenanceManager | None,
                 query_mem_limit: int | None = None):
        self.catalog = catalog
        self.maintenance = maintenance
        self.query_mem_limit = default_query_mem_limit() if query_mem_limit is None \
            else parse_bytes(query_mem_limit)
        self._closed = False

    @classmethod
    def open(cls, path: str, *, maintenance: bool = True, config=None,
             query_mem_limit: int | str | None = None) -> "Database":
        """`query_mem_limit`: sessions' default per-statement memory limit (bytes or
        '2GB'; None: a quarter of the machine's RAM; 0: none)."""
        limit = None if query_mem_limit is None else parse_bytes(query_mem_limit)
        mm = MaintenanceManager().start() if maintenance else None
        try:
            cat = Catalog.open(path, config=config, maintenance=mm)
        except BaseException:
            if mm is not None:
                mm.shutdown()
            raise
        return cls(cat, mm, limit)

    def session(self, catalog=None) -> "Session":
        """A new session; `catalog` replaces the engine catalog for name resolution (the
        wire server passes a wrapper that adds pg_catalog / information_schema views)."""
        return Session(self, catalog)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.maintenance is not None:
            self.maintenance.shutdown()
        self.catalog.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Session:
    """A connection's state. `cancel()` (from another thread) interrupts the running
    statement with 57014."""

    def __init__(self, db: Database, catalog=None):
        self.db = db
        self.catalog = catalog if catalog is not None else db.catalog
        self._plans = PlanCache()           # parameterised SELECTs, see planner/plan_cache
        self._insert_shapes: dict[str, tuple] = {}   # text -> parsed INSERT ... VALUES ($n)
        self._dml_asts: dict[str, exp.Expression] = {}   # text -> parsed UPDATE / DELETE
        self.in_transaction = False
        self._cancel = threading.Event()
        self.query_mem_limit = db.query_mem_limit    # bytes, 0 = none (SET query_mem_limit)
        # optimizer rules switched off by name (planner.rules.RULE_NAMES); set directly or
        # with SET kudusql.disabled_rules = 'name, ...' (the differential fuzzers use it)
        self.disabled_rules: frozenset[str] = frozenset()
        self.prepared: dict[str, statement.PreparedSql] = {}   # SQL-level PREPARE, by name

    def cancel(self) -> None:
        self._cancel.set()

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            self._cancel.clear()
            raise QueryCanceled("canceling statement due to user request")

    def _guard(self) -> QueryGuard:
        """The running statement's cancel check and memory meter (planner/guard.py)."""
        return QueryGuard(self._check_cancel, self.query_mem_limit)

    def execute(self, sql: str, params=None) -> list[StatementResult]:
        """Run every statement in `sql`; see the module docstring."""
        return list(self.execute_iter(sql, params, stream=False))

    def execute_iter(self, sql: str, params=None, stream: bool = True):
        """Like `execute`, one result at a time: a statement runs when its result is asked
        for. With `stream`, SELECT results stream their rows (`StatementResult.stream`);
        consume each before asking for the next, since later statements may write."""
        self._cancel.clear()
        stmts = split_statements(sql)
        if params and len(stmts) > 1:
            raise SqlError("cannot insert multiple commands into a prepared statement", "42601")
        for offset, text in stmts:
            with _sql_errors(offset):
                r = self.execute_one(text, params, stream=stream)
            yield r

    def describe(self, sql: str):
        """(parameter types, result schema) of one statement without running it: the wire
        protocol's ParameterDescription and RowDescription. Types are Arrow types; a
        parameter type is None when nothing in the statement implies one; the schema is None
        for statements that return no rows."""
        stmts = split_statements(sql)
        if len(stmts) != 1:
            if not stmts:
                return [], None
            raise SqlError("cannot insert multiple commands into a prepared statement", "42601")
        offset, text = stmts[0]
        m = _EXPLAIN.match(text)
        with _sql_errors(offset):
            if m:
                asts = parse(text[m.end():])
                params = statement.parameter_types(self.catalog, asts[0]) if asts else []
                return params, pa.schema([pa.field("QUERY PLAN", pa.string())])
            if text[:6].upper() == "UPSERT":
                text = "INSERT" + text[6:]
            asts = parse(text)
            if not asts:
                return [], None
            ast = asts[0]
            if isinstance(ast, (exp.Transaction, exp.Commit, exp.Rollback, exp.Set,
                                KuduPrepare, KuduDeallocate)):
                return [], None
            if isinstance(ast, KuduExecute):
                p = self.prepared.get(_ident(ast.this))
                if p is None:
                    raise SqlError(f'prepared statement "{_ident(ast.this)}" does not exist',
                                   "26000")
                inner = parse(p.text)[0]
                if not isinstance(inner, statement.QUERY_TYPES):
                    return [], None
                params = [pa.scalar(None, t if t is not None else pa.null()) for t in p.types]
                return [], statement.describe_query(self.catalog, inner, p.text, params)
            from planner.utility import is_utility
            if is_utility(ast):
                schema = self._utility_schema(ast, text)
                return [], schema
            return statement.describe(self.catalog, ast, text)

    def _prepared_statement(self, ast, text: str, stream: bool) -> StatementResult:
        """PREPARE / EXECUTE / DEALLOCATE: the session's named statements (PostgreSQL's
        SQL-level prepared statements). EXECUTE runs the statement text with its arguments
        as parameters, so a query goes through the plan cache as a Bind would."""
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
            self.prepared[name] = statement.prepare(self.catalog, ast, text, name)
            return StatementResult("PREPARE")
        p = self.prepared.get(name)
        if p is None:
            raise SqlError(f'prepared statement "{name}" does not exist', "26000")
        params = statement.execute_arguments(self.catalog, p, ast, text)
        try:
            return self._execute_one(p.text, params or None, stream)
        except SqlError as e:
            e.position = None        # a position in the PREPAREd text, not in this one
            raise

    def _utility_schema(self, ast, text):
        """SHOW / DESCRIBE return rows: their schema is that of running them (cheap)."""
        if isinstance(ast, (exp.Create, exp.Drop, exp.Alter, exp.Comment)):
            return None
        r = statement.execute(self.catalog, ast, text)
        return r.table.schema if r.table is not None else None

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
        stmts = split_statements(sql)
        if len(stmts) != 1 or not (param_sets or columns):
            return None
        offset, text = stmts[0]
        with _sql_errors(offset):
            return self._bulk_insert(text, param_sets, in_order, columns)

    def _bulk_insert(self, text: str, param_sets, in_order: bool = False,
                     columns: list | None = None) -> StatementResult | None:
        """The INSERT ... VALUES ($1..$n) path without binding (see execute_many); its
        parse is cached per statement text. None for other statements."""
        shape = self._insert_shapes.get(text)
        if shape is None:
            upsert = text[:6].upper() == "UPSERT"
            sql = "INSERT" + text[6:] if upsert else text
            try:
                asts = parse(sql)
            except SqlError:
                asts = []
            n = statement.bulk_parameters(asts[0]) if len(asts) == 1 else None
            shape = (asts[0], n, upsert, sql) if n is not None else (None, None, None, None)
            if len(self._insert_shapes) > 256:
                self._insert_shapes.clear()
            self._insert_shapes[text] = shape
        ast, n, upsert, sql = shape
        if ast is None or (len(columns) != n if columns is not None else
                           any(len(p) != n for p in param_sets)):
            return None
        try:
            if columns is not None:
                columns = [c if isinstance(c, pa.Array) else pa.array(c) for c in columns]
            else:
                columns = [pa.array([p[i].as_py() if isinstance(p[i], pa.Scalar) else p[i]
                                     for p in param_sets]) for i in range(n)]
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            return None        # values pyarrow cannot type as one column: the slow path
        target = statement.insert_target(self.catalog, ast, sql)
        if in_order and target.ignore_dups:
            return None
        rows = pa.Table.from_arrays(columns, names=[f"c{i}" for i in range(n)])
        return statement.insert_rows(target, rows, upsert, sql, ast.expression, in_order)

    def execute_point(self, text: str, params) -> StatementResult | None:
        """The statement's result if it is a cached primary-key point read whose tablets are
        open (bounded, in-memory work: the wire server runs it on its event loop), else
        None without doing anything; see planner.fastpath."""
        if not params:
            return None
        with _sql_errors():
            t = self._plans.point_result(self.catalog, text, params, in_memory_only=True)
        return None if t is None else StatementResult.rows("SELECT", t)

    def point_read(self, text: str, params):
        """(PointRead, table) when `text` with these parameters is a cached primary-key
        point read of plain columns whose tablets are open, else None (nothing done): the
        wire server's fast path (wire/fastpath.py) runs it without building a result
        table. See planner.fastpath."""
        if not params:
            return None
        fast = self._plans.point_read(self.catalog, text, params)
        if fast is None or fast.plain is None:
            return None
        table = self.catalog.table(fast.table)
        return (fast, table) if fast.ready(table) else None

    def execute_one(self, text: str, params=None, stream: bool = False) -> StatementResult:
        """One statement; engine errors come out as SqlError with their SQLSTATE."""
        # the session's rule switches, else whatever a caller's rules.disabled_rules block
        # set for this thread
        switches = rules.disabled_rules(self.disabled_rules) if self.disabled_rules else \
            contextlib.nullcontext()
        with _sql_errors(), switches:
            r = self._execute_one(text, params, stream)
        if r.stream is not None:
            r.stream = _engine_errors_as_sql(r.stream)
        return r

    def _set(self, ast: exp.Set) -> None:
        """The settings the embedded session acts on: SET query_mem_limit = '2GB' | DEFAULT
        and SET kudusql.disabled_rules = 'name, ...' | DEFAULT; other settings are accepted
        and ignored (the wire server keeps its own, wire.settings)."""
        for item in ast.expressions:
            eq = item.this if isinstance(item, exp.SetItem) else None
            if not isinstance(eq, exp.EQ):
                continue
            name = eq.this.sql().lower() if isinstance(eq.this, exp.Column) else \
                eq.this.name.lower()
            v = eq.expression
            text = v.name if isinstance(v, (exp.Literal, exp.Column, exp.Var)) else v.sql()
            default = isinstance(v, (exp.Var, exp.Column)) and text.upper() == "DEFAULT"
            if name == "query_mem_limit":
                self.query_mem_limit = self.db.query_mem_limit if default or \
                    text.lower() == "default" else parse_bytes(text)
            elif name == "kudusql.disabled_rules":
                self.disabled_rules = rules.check_rule_names(
                    [] if default else text.split(","))

    def _execute_one(self, text: str, params=None, stream: bool = False) -> StatementResult:
        m = _EXPLAIN.match(text)
        if m:
            opts = (m.group(1) or m.group(2) or "").lower()
            analyze = "analy" in opts
            inner = text[m.end():]
            with _sql_errors(m.end()):
                asts = parse(inner)
                if len(asts) != 1:
                    raise SqlSyntaxError("EXPLAIN needs one statement", position=1)
                return statement.explain(self.catalog, asts[0], inner, params, analyze,
                                         self._guard())
        if params:
            t = self._plans.point_result(self.catalog, text, params)
            if t is not None:
                return StatementResult.rows("SELECT", t)
            out = self._plans.lookup(self.catalog, text, params)
            if out is not None:
                return statement.run_cached(self.catalog, out, stream, self._guard())
            r = self._bulk_insert(text, [params])
            if r is not None:
                return r
        upsert = False
        if text[:6].upper() == "UPSERT" and (len(text) == 6 or not text[6].isalnum()):
            upsert = True
            text = "INSERT" + text[6:]    # same length: error positions stay right
        ast = self._dml_asts.get(text)
        if ast is None:
            asts = parse(text)
            if not asts:
                return StatementResult("EMPTY")
            ast = asts[0]
            if params and isinstance(ast, (exp.Update, exp.Delete)):
                # UPDATE/DELETE read their AST without changing it (statement.update):
                # executed again, they skip the parse and reach the plan cache
                if len(self._dml_asts) > 256:
                    self._dml_asts.clear()
                self._dml_asts[text] = ast
        if isinstance(ast, exp.Transaction):
            self.in_transaction = True
            return StatementResult("BEGIN")
        if isinstance(ast, exp.Commit):
            self.in_transaction = False
            return StatementResult("COMMIT")
        if isinstance(ast, exp.Rollback):
            self.in_transaction = False
            return StatementResult("ROLLBACK", notices=[
                "kudusql applies each statement when it runs (Kudu semantics): ROLLBACK "
                "does not undo writes that were already applied"])
        if isinstance(ast, exp.Set):
            self._set(ast)
            return StatementResult("SET")
        if isinstance(ast, (KuduPrepare, KuduExecute, KuduDeallocate)):
            return self._prepared_statement(ast, text, stream)
        return statement.execute(self.catalog, ast, text, params, upsert=upsert,
                                 check_cancel=self._guard(), stream=stream,
                                 cache=self._plans)
