"""KuduSQL: the sqlglot dialect of kudusql — Postgres, plus Impala's DDL for Kudu tables.

The dialect subclasses sqlglot's Postgres dialect and only *extends* its class-level tables
(`Tokenizer.KEYWORDS` / `COMMANDS`, `Parser.PROPERTY_PARSERS` / `CONSTRAINT_PARSERS` /
`ALTER_PARSERS` / `STATEMENT_PARSERS` / `SHOW_PARSERS`, `Generator.TRANSFORMS` /
`PROPERTIES_LOCATION`); no parser method is rewritten wholesale.

What it adds to Postgres (Impala grammar, kudu-facts §1.1):

    CREATE TABLE [IF NOT EXISTS] t (
        col type [[NON UNIQUE] PRIMARY KEY] [NOT NULL | NULL] [DEFAULT const]
                 [ENCODING e] [COMPRESSION c] [BLOCK_SIZE n] [COMMENT '...'], ...
        [, PRIMARY KEY (a, b)])
    [PARTITION BY HASH [(cols)] PARTITIONS n [, HASH ...] [, RANGE [(cols)] (bound, ...)]]
    [DISTRIBUTE BY HASH (cols) INTO n BUCKETS]          -- the Kudu paper's older form
    [COMMENT '...'] [STORED AS KUDU] [TBLPROPERTIES ('k' = 'v', ...)] [WITH (k = v, ...)]

    bound ::= PARTITION VALUE = const_or_tuple
            | PARTITION [const (< | <=)] VALUES [(< | <=) const]   [HASH (...) PARTITIONS n ...]

Nodes produced (all `exp.Expr`):

    Create.properties
     ├── KuduPartitionByProperty(expressions=[KuduHashPartition..., KuduRangePartition?])
     │     KuduHashPartition(expressions=[Identifier...] (empty = all key columns), buckets)
     │     KuduRangePartition(expressions=[Identifier...], bounds=[KuduRangeBound...])
     │     KuduRangeBound(value | lower/lower_op, upper/upper_op, hash=[KuduHashPartition...])
     ├── KuduDistributeByProperty(expressions=[Identifier...], buckets)
     ├── FileFormatProperty(this=Var(KUDU))            -- STORED AS KUDU
     └── Property(this=key, value=...)                 -- TBLPROPERTIES and WITH entries
    ColumnDef.constraints: KuduEncodingColumnConstraint, KuduCompressionColumnConstraint,
      KuduBlockSizeColumnConstraint, KuduNonUniquePrimaryKeyColumnConstraint, plus
      sqlglot's own (PrimaryKey, NotNull, Default, Comment).

Types: Impala spellings (TINYINT ... STRING, BINARY) and Postgres ones (INTEGER, INT8, TEXT,
BYTEA, REAL, DOUBLE PRECISION, NUMERIC, BOOL) both parse; unlike Postgres, FLOAT is Impala's
4-byte FLOAT (Postgres reads it as DOUBLE PRECISION).

Utility statements (Impala for Kudu, plus PostgreSQL spellings; executed by
planner.utility):

    ALTER TABLE t ADD [IF NOT EXISTS] [RANGE] PARTITION bound      -> KuduAddRangePartition
    ALTER TABLE t DROP [IF EXISTS] [RANGE] PARTITION bound         -> KuduDropRangePartition
    ALTER TABLE t ADD [IF NOT EXISTS] COLUMNS (col type ..., ...)  -> ColumnDef actions
    ALTER TABLE t CHANGE [COLUMN] old new type                     -> KuduChangeColumn
    ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] ('k', ...)       -> KuduUnsetProperties
    SHOW TABLES [[LIKE] 'pattern'] | SHOW COLUMNS {FROM | IN} t | SHOW [RANGE] PARTITIONS t
      | SHOW TABLETS t | SHOW CREATE TABLE t                        -> KuduShow(kind, this)
    bound ::= ... | PARTITION UNBOUNDED          (what SHOW CREATE TABLE prints for a range
                                                  with neither bound; `RANGE (c) ()` = no
                                                  range at all; both are KuduSQL's own)

The rest (DROP TABLE, ALTER TABLE RENAME [COLUMN] / ADD [COLUMN] / DROP [COLUMN] / SET
TBLPROPERTIES, DESCRIBE, COMMENT ON) are sqlglot's own nodes. SHOW of a setting (`SHOW
search_path`, `SHOW ALL`) is KuduShowSetting (planner/commands.py); another SHOW (`SHOW
DATABASES`) stays an `exp.Command`; an ALTER TABLE sqlglot cannot parse is a syntax error.

The front door: every statement kind the server accepts is parsed here, once, into a node
(`parse_sql`). PostgreSQL's session commands - transaction control, SET / RESET / SHOW a
setting, CREATE / ALTER / DROP USER, DECLARE / FETCH / MOVE / CLOSE, DISCARD, LISTEN /
NOTIFY / UNLISTEN, COPY, EXPLAIN - go from `Parser._parse_statement` to their grammars in
planner/commands.py (`_command`: the grammar reads the statement's text; a statement
inside one is parsed here with it; error positions move into the parsed string), and
`UPSERT INTO ...` is parsed as INSERT into `KuduUpsert` (planner/commands.py).

Session statements (PostgreSQL's SQL-level prepared statements; run by session/session.py):

    PREPARE name [(type, ...)] AS statement   -> KuduPrepare(this, expressions, expression,
                                                  text = the statement as written)
    EXECUTE name [(value, ...)]               -> KuduExecute(this, expressions)
    DEALLOCATE [PREPARE] name | ALL           -> KuduDeallocate(this | None)

`now()` parses as KuduNow, a CURRENT_TIMESTAMP that keeps its name (the result column is
`now`, as in PostgreSQL).

Parse errors carry the 0-based character offset of the offending token in
`ParseError.errors[i]["start"]` (see `KuduSQL.Parser.raise_error`), and the grammar's own
expectation ("Expected PARTITIONS") in `["hint"]`. `syntax_error(sql, err)` turns a
ParseError or TokenError into PostgreSQL's words (`syntax error at or near "SELEC"`,
`syntax error at end of input`, `unterminated quoted string at or near "'abc"`) with the
token's 1-based position; `check_statement_starts` refuses a statement that starts with a
word no statement starts with, `check_complete` the unfinished statements sqlglot accepts
(`UPDATE t SET`, `GROUP BY` with nothing after, `FROM t ORDER`).

Files: the Kudu DDL pieces (the partitioning and column-attribute nodes, their parser and
generator functions) are planner/dialect_kudu.py's, re-exported here; this module holds
the dialect class that puts every piece in sqlglot's tables, the statement grammars that
parse a statement inside themselves (PREPARE, the session commands' entry `_command`,
UPSERT, SHOW), and the syntax errors. The session commands' own grammars are
planner/commands.py's.

Not done here: CTAS and CREATE EXTERNAL TABLE (they parse as whatever Postgres makes of
them).
"""

from __future__ import annotations

import re
from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import TokenizerCore
from sqlglot.tokens import Token, TokenType
from sqlglot.trie import new_trie

from planner import commands as C
from planner.dialect_kudu import (  # noqa: F401 - the Kudu DDL nodes are the dialect's
    KuduAddRangePartition,
    KuduBlockSizeColumnConstraint,
    KuduChangeColumn,
    KuduCompressionColumnConstraint,
    KuduDistributeByProperty,
    KuduDropRangePartition,
    KuduEncodingColumnConstraint,
    KuduHashPartition,
    KuduNonUniquePrimaryKeyColumnConstraint,
    KuduPartitionByProperty,
    KuduPrimaryKeyProperty,
    KuduRangeBound,
    KuduRangePartition,
    KuduUnsetProperties,
    alterset_sql,
    bound_sql,
    expect_number,
    hash_sql,
    parse_kudu_alter_add,
    parse_kudu_alter_drop,
    parse_kudu_change,
    parse_kudu_distribute_by,
    parse_kudu_partition_by,
    parse_kudu_primary_key,
    parse_kudu_unset,
    parse_name,
    parse_non_unique,
    property_sql,
    raise_syntax_error,
    range_ddl_sql,
    range_sql,
)
from planner.errors import SqlError, SqlSyntaxError

# -- nodes --------------------------------------------------------------------------------
class KuduShow(exp.Expression):
    """SHOW `kind` [table]: kind is TABLES (`like`: a pattern), COLUMNS, PARTITIONS (also
    spelled RANGE PARTITIONS), TABLETS, CREATE TABLE, VIEWS (`like`) or CREATE VIEW."""

    arg_types: ClassVar[dict[str, bool]] = {"kind": True, "this": False, "like": False}


class KuduNow(exp.CurrentTimestamp):
    """`now()`: CURRENT_TIMESTAMP under its own name (PostgreSQL names the result column
    `now`); evaluated as CURRENT_TIMESTAMP."""

    _sql_names: ClassVar[list[str]] = ["NOW"]


class KuduDatePart(exp.Expression, exp.Func):
    """`date_part(field, source)`: EXTRACT's field as double precision (EXTRACT itself is
    numeric), under its own name (PostgreSQL names the result column `date_part`)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True}
    _sql_names: ClassVar[list[str]] = ["DATE_PART"]


class KuduPrepare(exp.Expression):
    """`PREPARE name [(type, ...)] AS statement`: `this` the name, `expressions` the
    declared parameter types, `expression` the statement, `text` its SQL text as written
    (what the session runs on EXECUTE, and pg_prepared_statements shows)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": False,
                                            "expression": True, "text": True}


class KuduExecute(exp.Expression):
    """`EXECUTE name [(value, ...)]`."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": False}


class KuduDeallocate(exp.Expression):
    """`DEALLOCATE [PREPARE] name`; no `this` = `DEALLOCATE [PREPARE] ALL`."""

    arg_types: ClassVar[dict[str, bool]] = {"this": False}


# -- statement grammars ------------------------------------------------------------------

def _show_table(kind: str, prefix: tuple[str, ...] = ()):
    """A SHOW_PARSERS entry: `SHOW <kind> [prefix] table`."""

    def parse(self: Parser) -> KuduShow:
        if prefix and not self._match_texts(prefix):
            raise_syntax_error(self, f"Expected {' or '.join(prefix)}")
        table = self._parse_table_parts()
        if table is None or not table.name:
            raise_syntax_error(self, "Expected a table name")
        return self.expression(KuduShow(kind=kind, this=table))

    return parse


def _parse_prepare(self: Parser) -> KuduPrepare | None:
    # "PREPARE" already consumed
    name = self._parse_id_var(any_token=False)
    if name is None:
        raise_syntax_error(self, "Expected a statement name")
    types = self._parse_wrapped_csv(self._parse_types) \
        if self._curr and self._curr.token_type == TokenType.L_PAREN else []
    if not self._match(TokenType.ALIAS):
        raise_syntax_error(self, "Expected AS")
    start = self._curr
    if start is None:
        raise_syntax_error(self, "Expected a statement")
        return None
    if start.token_type not in STATEMENT_STARTS and (
            start.token_type in _QUOTED or start.text.upper() not in COMMAND_WORDS):
        self.raise_error("Expected a statement")
    stmt = self._parse_statement()
    return self.expression(KuduPrepare(this=name, expressions=types, expression=stmt,
                                       text=self.sql[start.start:].strip().rstrip(";")))


def _parse_execute(self: Parser) -> KuduExecute:
    # "EXECUTE" already consumed
    name = self._parse_id_var(any_token=False)
    if name is None:
        raise_syntax_error(self, "Expected a statement name")
    args = self._parse_wrapped_csv(self._parse_expression) \
        if self._curr and self._curr.token_type == TokenType.L_PAREN else []
    return self.expression(KuduExecute(this=name, expressions=args))


def _parse_deallocate(self: Parser) -> KuduDeallocate:
    # "DEALLOCATE" already consumed
    self._match_text_seq("PREPARE")
    if self._match(TokenType.ALL):
        return self.expression(KuduDeallocate())
    name = self._parse_id_var(any_token=False)
    if name is None:
        raise_syntax_error(self, "Expected a statement name or ALL")
    return self.expression(KuduDeallocate(this=name))


# statements whose first word sqlglot does not know as a keyword: parsed by text
_WORD_STATEMENTS = {"PREPARE": _parse_prepare, "DEALLOCATE": _parse_deallocate}

# words a statement may start with besides sqlglot's statement keywords
COMMAND_WORDS = frozenset(C.GRAMMARS) | frozenset(_WORD_STATEMENTS) | {"UPSERT"}
# tokens whose text is not a word ('copy', "copy"): never a statement's verb
_QUOTED = frozenset({TokenType.STRING, TokenType.IDENTIFIER})


def _command(self: Parser, grammar) -> exp.Expr:
    """A session command (planner/commands.py): its grammar reads the statement's text,
    from its first token to the end of the statement, and returns its node; a statement
    inside it (EXPLAIN's, DECLARE's query, what COPY TO reads) is parsed here, once. Error
    positions move from the command's text into the parsed string."""
    start = self._curr.start
    text = self.sql[start:self._tokens[-1].end + 1]
    try:
        node = grammar(text)
        if isinstance(node, C.KuduExplain):
            inner = _inner(node.args["inner"], node.args["offset"])
            if len(inner) != 1:
                raise SqlSyntaxError("EXPLAIN needs one statement",
                                     position=node.args["offset"] + 1)
            node.set("this", inner[0])
        elif isinstance(node, C.KuduDeclare):
            q = _inner(node.args["query_text"], node.args["query_offset"])
            node.set("query", q[0] if q else None)
        elif isinstance(node, C.KuduCopy) and node.args["spec"].direction == "to":
            spec = node.args["spec"]
            sql = spec.select_sql()
            q = _inner(sql, spec.query_offset if spec.query is not None else None)
            node.set("query", q[0] if q else None)
            node.set("query_text", sql)
    except SqlError as e:
        if e.position is not None:
            e.position += start
        raise
    if node is None:
        return None
    self._advance(len(self._tokens) - self._index)
    return node


def _inner(sql: str, offset: int | None) -> list[exp.Expr]:
    """The statements of `sql`, a part of a command's text starting `offset` characters
    into it (None: text of kudusql's making, whose positions mean nothing to the client)."""
    try:
        return parse_sql(sql)
    except SqlError as e:
        if e.position is not None:
            e.position = None if offset is None else e.position + offset
        raise


def _parse_upsert(self: Parser) -> C.KuduUpsert:
    # "UPSERT" already consumed: the rest is INSERT's (INTO required, as INSERT's)
    if self._curr is None or self._curr.token_type != TokenType.INTO:
        self.raise_error("Expected INTO")
    ins = self._parse_insert()
    return C.KuduUpsert(**ins.args) if isinstance(ins, exp.Insert) else ins


def _parse_show_tables(self: Parser) -> KuduShow:
    self._match(TokenType.LIKE)  # Impala: SHOW TABLES [[LIKE] 'pattern']
    like = self._parse_string()
    return self.expression(KuduShow(kind="TABLES", like=like))


def _parse_show_views(self: Parser) -> KuduShow:
    self._match(TokenType.LIKE)  # as SHOW TABLES: SHOW VIEWS [[LIKE] 'pattern']
    like = self._parse_string()
    return self.expression(KuduShow(kind="VIEWS", like=like))


# -- generator helpers ----------------------------------------------------------------------

def _show_sql(self: Generator, e: KuduShow) -> str:
    kind = e.args["kind"]
    s = f"SHOW {kind}"
    if e.this is not None:
        s += f" {'FROM ' if kind == 'COLUMNS' else ''}{self.sql(e, 'this')}"
    if e.args.get("like") is not None:
        s += f" LIKE {self.sql(e, 'like')}"
    return s


class _ParameterAwareCore(TokenizerCore):
    """sqlglot reads `$1,$2` as the start of a dollar-quoted string tagged `1,` (and fails);
    in PostgreSQL a `$` followed by a digit is always a parameter (a tag cannot start with
    a digit), which is what this core says before trying a dollar quote."""

    __slots__ = ()

    def _scan_string(self, start: str) -> bool:
        if start == "$" and self._peek.isdigit():
            self._add(self.heredoc_string_alternative)
            return True
        return super()._scan_string(start)


def _generate_series(args: list) -> exp.ExplodingGenerateSeries:
    """generate_series with its step as written: sqlglot's own builder re-parses an
    interval step into one unit and fails (AssertionError, XX000) on INTERVAL '1 month -1
    day'; the evaluator reads any interval text. A quoted step is an interval."""
    if len(args) > 2 and args[2].is_string:
        args[2] = exp.cast(args[2], exp.DataType.build("interval"))
    return exp.ExplodingGenerateSeries.from_arg_list(args)


# one `N unit` and nothing else: the only interval string sqlglot may split into 'N' UNIT
_ONE_INTERVAL_PART = re.compile(r"\s*-?[0-9]+(?:\.[0-9]+)?\s*[a-zA-Z]+\s*")


class KuduSQL(Postgres):
    class Tokenizer(Postgres.Tokenizer):
        KEYWORDS: ClassVar[dict] = {
            **{k: v for k, v in Postgres.Tokenizer.KEYWORDS.items() if k != "PREPARE"},
            "FLOAT": TokenType.FLOAT,  # Impala: 4-byte float (Postgres: double precision)
            "STRING": TokenType.TEXT,
            "BINARY": TokenType.VARBINARY,
        }
        # SHOW and EXECUTE are parsed (SHOW_PARSERS, STATEMENT_PARSERS), PREPARE too (a plain
        # word, see _WORD_STATEMENTS): none is swallowed as a raw command string
        COMMANDS: ClassVar[set] = Postgres.Tokenizer.COMMANDS - {TokenType.SHOW,
                                                                 TokenType.EXECUTE}

        def _init_core(self) -> TokenizerCore:
            core = super()._init_core()
            core.__class__ = _ParameterAwareCore
            return core

    class Parser(Postgres.Parser):
        FUNCTIONS: ClassVar[dict] = {
            **Postgres.Parser.FUNCTIONS,
            "NOW": KuduNow.from_arg_list,
            "DATE_PART": lambda args: KuduDatePart(this=args[0], expression=args[1])
            if len(args) == 2 else exp.Anonymous(this="date_part", expressions=args),
            "EVERY": exp.LogicalAnd.from_arg_list,      # the SQL standard's bool_and
            "GENERATE_SERIES": _generate_series,
            # the format as written (sqlglot would translate it to strftime's, losing FM,
            # quoted text and every pattern it does not know): planner/expr/formatting.py
            "TO_CHAR": lambda args: exp.Anonymous(this="to_char", expressions=args),
            "TO_DATE": lambda args: exp.Anonymous(this="to_date", expressions=args),
            "TO_TIMESTAMP": lambda args: exp.UnixToTime(this=args[0]) if len(args) == 1
            else exp.Anonymous(this="to_timestamp", expressions=args),
        }

        # date_part is not EXTRACT: it answers a double and names its column date_part
        FUNCTION_PARSERS: ClassVar[dict] = {
            k: v for k, v in Postgres.Parser.FUNCTION_PARSERS.items() if k != "DATE_PART"}

        PROPERTY_PARSERS: ClassVar[dict] = {
            **Postgres.Parser.PROPERTY_PARSERS,
            "PARTITION BY": parse_kudu_partition_by,
            "DISTRIBUTE BY": parse_kudu_distribute_by,
            "PRIMARY KEY": parse_kudu_primary_key,
        }

        CONSTRAINT_PARSERS: ClassVar[dict] = {
            **Postgres.Parser.CONSTRAINT_PARSERS,
            "ENCODING": lambda self: self.expression(
                KuduEncodingColumnConstraint(this=parse_name(self))),
            "COMPRESSION": lambda self: self.expression(
                KuduCompressionColumnConstraint(this=parse_name(self))),
            "BLOCK_SIZE": lambda self: self.expression(
                KuduBlockSizeColumnConstraint(this=expect_number(self))),
            "NON": parse_non_unique,
        }

        ALTER_PARSERS: ClassVar[dict] = {
            **Postgres.Parser.ALTER_PARSERS,
            "ADD": parse_kudu_alter_add,
            "DROP": parse_kudu_alter_drop,
            "CHANGE": parse_kudu_change,
            "UNSET": parse_kudu_unset,
        }

        STATEMENT_PARSERS: ClassVar[dict] = {
            **Postgres.Parser.STATEMENT_PARSERS,
            TokenType.SHOW: lambda self: self._parse_show(),
            TokenType.EXECUTE: _parse_execute,
        }

        SHOW_PARSERS: ClassVar[dict] = {
            **Postgres.Parser.SHOW_PARSERS,
            "TABLES": _parse_show_tables,
            "VIEWS": _parse_show_views,
            "COLUMNS": _show_table("COLUMNS", ("FROM", "IN")),
            "PARTITIONS": _show_table("PARTITIONS"),
            "RANGE PARTITIONS": _show_table("PARTITIONS"),
            "TABLETS": _show_table("TABLETS"),
            "CREATE TABLE": _show_table("CREATE TABLE"),
            "CREATE VIEW": _show_table("CREATE VIEW"),
        }
        SHOW_TRIE: ClassVar[dict] = new_trie(key.split(" ") for key in SHOW_PARSERS)

        def _parse_type(self, parse_interval: bool = True,
                        fallback_to_identifier: bool = False) -> exp.Expr | None:
            """As sqlglot's, except that a typed literal binds tighter than `::` as in
            PostgreSQL: `DATE '2020-01-01'::text` is the date cast to text (sqlglot applied
            the `::` to the string first, giving CAST(CAST('...' AS TEXT) AS DATE): a DATE,
            and `TIMESTAMP '... 10:00'::date` a timestamp at midnight)."""
            toks, i = self._tokens, self._index
            if (not fallback_to_identifier and i + 2 < len(toks)
                    and toks[i].token_type in self.TYPE_TOKENS
                    and toks[i].token_type != TokenType.INTERVAL
                    and toks[i + 1].token_type == TokenType.STRING
                    and toks[i + 2].token_type == TokenType.DCOLON):
                data_type = self._parse_types(check_func=True, allow_identifiers=False)
                literal = self._parse_primary() if data_type is not None else None
                if isinstance(literal, exp.Literal) and \
                        self._curr is not None and self._curr.token_type == TokenType.DCOLON:
                    parser = self.TYPE_LITERAL_PARSERS.get(data_type.this)
                    typed = parser(self, literal, data_type) if parser else \
                        self.expression(exp.Cast(this=literal, to=data_type))
                    return self._parse_column_ops(typed)
                self._retreat(i)
            return super()._parse_type(parse_interval, fallback_to_identifier)

        def _parse_interval_span(self, this: exp.Expr,
                                 parse_function_unit: bool = True) -> exp.Interval:
            """As sqlglot's, except that a string holding more than one `N unit` part is
            kept whole: sqlglot rewrites a string with exactly one such part into
            `'N' UNIT` and drops the rest, so `INTERVAL '3 days 04:05:06'` was 3 days and
            `INTERVAL '-1 day +02:00:00'` -1 day (found by the diff fuzzer, seed
            2720089791245014); planner/expr/interval_values.py reads the whole string."""
            text = this.name if this is not None and this.is_string else None
            interval = super()._parse_interval_span(this, parse_function_unit)
            if text is not None and not _ONE_INTERVAL_PART.fullmatch(text) and \
                    interval.this is not None and interval.this.name != text and \
                    interval.args.get("unit") is not None:
                interval.set("this", exp.Literal.string(text))
                interval.set("unit", None)
                interval.set("fraction_in_string", None)
            return interval

        def _parse_statement(self) -> exp.Expr | None:
            """As sqlglot's, plus the session commands (planner/commands.py: their first
            word, or CREATE / ALTER / DROP USER | ROLE), UPSERT, and the statements named
            by a plain word (_WORD_STATEMENTS)."""
            cur = self._curr
            if cur is not None and cur.token_type not in _QUOTED:
                word = cur.text.upper()
                grammar = C.GRAMMARS.get(word)
                if grammar is None and word in ("CREATE", "ALTER", "DROP") and \
                        self._next is not None and self._next.text.upper() in C.ROLE_WORDS:
                    grammar = C.parse_role
                if grammar is not None:
                    return _command(self, grammar)
                if cur.token_type == TokenType.VAR:
                    if word == "UPSERT":
                        self._advance()
                        return _parse_upsert(self)
                    parse = _WORD_STATEMENTS.get(word)
                    if parse is not None:
                        self._advance()
                        return parse(self)
            return super()._parse_statement()

        def _parse_types(self, *args, **kwargs):
            """As sqlglot's, plus arrays of object identifiers: `x::regtype[]` (pgcli's
            function list) is an ARRAY DataType whose element is the ObjectIdentifier."""
            t = super()._parse_types(*args, **kwargs)
            if isinstance(t, exp.ObjectIdentifier) and self._curr is not None and \
                    self._curr.token_type == TokenType.L_BRACKET and \
                    self._next is not None and self._next.token_type == TokenType.R_BRACKET:
                self._advance(2)
                return exp.DataType(this=exp.DataType.Type.ARRAY, expressions=[t],
                                    nested=True)
            return t

        def _parse_as_command(self, start: Token) -> exp.Command:
            """A CREATE TABLE or ALTER TABLE sqlglot cannot parse is a syntax error here, not
            a Command."""
            if start.token_type == TokenType.CREATE and self._curr:
                i = next((i for i, t in enumerate(self._tokens) if t is start), None)
                if i is not None and any(t.token_type == TokenType.TABLE
                                         for t in self._tokens[i + 1:i + 4]):
                    self.raise_error(f'syntax error at or near "{self._curr.text}"')
            if start.token_type == TokenType.ALTER:
                i = next((i for i, t in enumerate(self._tokens) if t is start), None)
                if i is not None and i + 1 < len(self._tokens) and \
                        self._tokens[i + 1].token_type == TokenType.TABLE:
                    if self._curr:
                        self.raise_error(f'syntax error at or near "{self._curr.text}"')
                    else:
                        self.raise_error("syntax error at end of input")
            if start.token_type == TokenType.SHOW:
                # SHOW a setting (SHOW search_path, SHOW ALL): KuduShowSetting
                end = self._tokens[-1].end + 1 if self._tokens else start.end + 1
                node = C.parse_show_setting(self.sql[start.start:end])
                if node is not None:
                    self._advance(len(self._tokens) - self._index)
                    return node
                # another SHOW (SHOW DATABASES): the same Command as Postgres makes of it
                cmd = super()._parse_as_command(start)
                rest = cmd.expression.strip() if isinstance(cmd.expression, str) else ""
                return exp.Command(this="SHOW",
                                   expression=exp.Literal.string(rest) if rest else None)
            return super()._parse_as_command(start)

        def raise_error(self, message: str, token: Token | None = None) -> None:  # type: ignore[override]
            """As sqlglot's, and record the token's character offset as `start`."""
            at_end = not token and not self._curr
            token = token or self._curr or self._prev or Token.string("")
            # out of input: point just past the last token, as PostgreSQL does
            start = token.end + 1 if at_end and token else token.start
            hint, self._kudu_hint = getattr(self, "_kudu_hint", None), None
            n = len(self.errors)
            try:
                super().raise_error(message, token)
            except ParseError as e:
                for d in e.errors:
                    d.setdefault("start", start)
                    d.setdefault("hint", hint)
                raise
            for err in self.errors[n:]:
                for d in err.errors:
                    d.setdefault("start", start)
                    d.setdefault("hint", hint)

    class Generator(Postgres.Generator):
        TRANSFORMS: ClassVar[dict] = {
            **Postgres.Generator.TRANSFORMS,
            exp.FileFormatProperty: lambda self, e: f"STORED AS {self.sql(e, 'this')}",
            exp.Property: property_sql,
            exp.SchemaCommentProperty: lambda self, e: f"COMMENT {self.sql(e, 'this')}",
            KuduHashPartition: hash_sql,
            KuduRangeBound: bound_sql,
            KuduRangePartition: range_sql,
            KuduPartitionByProperty: lambda self, e: "PARTITION BY "
            + ", ".join(self.sql(x) for x in e.expressions),
            KuduPrimaryKeyProperty: lambda self, e:
                f"PRIMARY KEY ({self.expressions(e, flat=True)})",
            KuduDistributeByProperty: lambda self, e: "DISTRIBUTE BY HASH"
            + (f" ({self.expressions(e, flat=True)})" if e.expressions else "")
            + f" INTO {self.sql(e, 'buckets')} BUCKETS",
            KuduEncodingColumnConstraint: lambda self, e: f"ENCODING {self.sql(e, 'this')}",
            KuduCompressionColumnConstraint: lambda self, e:
                f"COMPRESSION {self.sql(e, 'this')}",
            KuduBlockSizeColumnConstraint: lambda self, e: f"BLOCK_SIZE {self.sql(e, 'this')}",
            KuduNonUniquePrimaryKeyColumnConstraint: lambda self, e: "NON UNIQUE PRIMARY KEY",
            KuduAddRangePartition: range_ddl_sql("ADD", "IF NOT EXISTS"),
            KuduDropRangePartition: range_ddl_sql("DROP", "IF EXISTS"),
            KuduChangeColumn: lambda self, e:
                f"CHANGE COLUMN {self.sql(e, 'this')} {self.sql(e, 'expression')}",
            KuduUnsetProperties: lambda self, e: "UNSET TBLPROPERTIES"
            + (" IF EXISTS" if e.args.get("exists") else "")
            + f" ({self.expressions(e, flat=True)})",
            KuduShow: _show_sql,
            KuduNow: lambda self, e: "NOW()",
            exp.AlterSet: alterset_sql,
            KuduPrepare: lambda self, e: f"PREPARE {self.sql(e, 'this')}"
            + (f" ({self.expressions(e, flat=True)})" if e.expressions else "")
            + f" AS {e.args['text']}",
            KuduExecute: lambda self, e: f"EXECUTE {self.sql(e, 'this')}"
            + (f" ({self.expressions(e, flat=True)})" if e.expressions else ""),
            KuduDeallocate: lambda self, e: "DEALLOCATE "
            + (self.sql(e, "this") if e.this is not None else "ALL"),
            C.KuduUpsert: lambda self, e: "UPSERT" + self.insert_sql(e)[len("INSERT"):],
            **{cls: lambda self, e: e.args["text"] for cls in (
                C.KuduTransaction, C.KuduSet, C.KuduReset, C.KuduShowSetting, C.KuduRole,
                C.KuduDeclare, C.KuduFetch, C.KuduClose, C.KuduDiscard, C.KuduListen,
                C.KuduCopy, C.KuduExplain)},
        }

        TYPE_MAPPING: ClassVar[dict] = {
            **Postgres.Generator.TYPE_MAPPING,
            exp.DataType.Type.FLOAT: "FLOAT",
            exp.DataType.Type.TINYINT: "TINYINT",
        }

        PROPERTIES_LOCATION: ClassVar[dict] = {
            **Postgres.Generator.PROPERTIES_LOCATION,
            exp.FileFormatProperty: exp.Properties.Location.POST_SCHEMA,
            exp.SchemaCommentProperty: exp.Properties.Location.POST_SCHEMA,
            KuduPartitionByProperty: exp.Properties.Location.POST_SCHEMA,
            KuduDistributeByProperty: exp.Properties.Location.POST_SCHEMA,
            KuduPrimaryKeyProperty: exp.Properties.Location.POST_SCHEMA,
        }


Parser = KuduSQL.Parser
Generator = KuduSQL.Generator


# -- syntax errors in PostgreSQL's words -----------------------------------------------------

# What a statement may start with; anything else (`SELEC * FROM t`) is a syntax error at
# that first word, as in PostgreSQL (sqlglot would read a bare word as an expression).
STATEMENT_STARTS = frozenset(Parser.STATEMENT_PARSERS) | frozenset(KuduSQL.Tokenizer.COMMANDS) | {
    TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN, TokenType.VALUES, TokenType.TABLE,
    TokenType.SHOW, TokenType.COMMAND}

_UNTERMINATED = (("/*", "unterminated /* comment"), ("'", "unterminated quoted string"),
                 ('"', "unterminated quoted identifier"),
                 ("$", "unterminated dollar-quoted string"))


def _unterminated(sql: str) -> tuple[str, int] | None:
    """(PostgreSQL's message, 0-based offset) of the quote or comment left open in `sql`,
    or None. A small scanner of its own: sqlglot's TokenError does not say where."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                return _UNTERMINATED[0][1], i
            i = j
        elif c in "'\"":
            escapes = c == "'" and i > 0 and sql[i - 1] in "eE" and \
                (i < 2 or not (sql[i - 2].isalnum() or sql[i - 2] == "_"))
            j = i + 1
            while True:
                if j >= n:
                    return dict(_UNTERMINATED)[c], i - (1 if escapes else 0)
                if escapes and sql[j] == "\\":
                    j += 2
                elif sql[j] == c:
                    if sql[j + 1:j + 2] == c:
                        j += 2
                    else:
                        break
                else:
                    j += 1
            i = j + 1
        elif c == "$" and not sql[i + 1:i + 2].isdigit() and \
                (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
            k = i + 1                                  # $tag$ ... $tag$ ($1 is a parameter)
            while k < n and (sql[k].isalnum() or sql[k] == "_"):
                k += 1
            if k < n and sql[k] == "$":
                j = sql.find(sql[i:k + 1], k + 1)
                if j < 0:
                    return _UNTERMINATED[3][1], i
                i = j + k + 1 - i
            else:
                i += 1
        else:
            i += 1
    return None


def _near(sql: str, start: int) -> str:
    return sql[start:start + 40].split("\n")[0]


def syntax_error(sql: str, err: Exception | None = None):
    """The `SqlSyntaxError` (42601) PostgreSQL would report for `sql`, given sqlglot's
    ParseError or TokenError `err`: `syntax error at or near "TOKEN"` at that token's
    1-based position, `syntax error at end of input` just past the end, or
    `unterminated quoted string at or near "'abc"` at the opening quote. The dialect's
    own grammar words ("Expected PARTITIONS") become the hint; sqlglot's descriptions,
    which name its Python classes, are never shown."""

    try:
        tokens = KuduSQL().tokenize(sql)
    except Exception:  # noqa: BLE001 - sqlglot's TokenError, and anything it raises there
        open_ = _unterminated(sql)
        if open_ is not None:
            msg, at = open_
            return SqlSyntaxError(f'{msg} at or near "{_near(sql, at)}"', position=at + 1)
        return SqlSyntaxError("syntax error", position=None)
    d = (getattr(err, "errors", None) or [{}])[0]
    hint = d.get("hint")
    start = d.get("start")
    first = _first_bad_start(tokens)
    if first is not None:
        start, hint = first.start, None
    if start is None:
        return SqlSyntaxError("syntax error", position=None)
    tok = next((t for t in tokens if t.end >= start and t.token_type != TokenType.SEMICOLON),
               None)
    if tok is None:
        return SqlSyntaxError("syntax error at end of input",
                              position=len(sql.rstrip()) + 1, hint=hint)
    return SqlSyntaxError(f'syntax error at or near "{sql[tok.start:tok.end + 1]}"',
                          position=tok.start + 1, hint=hint)


def _first_bad_start(tokens: list[Token]) -> Token | None:
    """The first token of a statement that no statement starts with, if any."""
    at_start = True
    for t in tokens:
        if t.token_type == TokenType.SEMICOLON:
            at_start = True
        elif at_start:
            if t.token_type not in STATEMENT_STARTS and (
                    t.token_type in _QUOTED or t.text.upper() not in COMMAND_WORDS):
                return t
            at_start = False
    return None


# words PostgreSQL reserves: never a table alias without AS (`FROM t ORDER` is unfinished)
_RESERVED = frozenset({"ORDER", "GROUP", "LIMIT", "OFFSET", "HAVING", "WHERE", "WINDOW",
                       "UNION", "EXCEPT", "INTERSECT", "FETCH", "FOR", "INTO", "FROM",
                       "SELECT", "ON", "USING", "JOIN", "SET", "VALUES", "RETURNING"})


def check_complete(stmts: list, tokens: list[Token], sql: str) -> None:
    """Raise the syntax error PostgreSQL gives for statements sqlglot accepts unfinished:
    `UPDATE t SET` (no assignment), `... GROUP BY` (no expression), `FROM t ORDER` (a
    reserved word read as an alias), `INSERT t` / `INSERT INTO t` (no INTO, no rows),
    `ALTER TABLE t DROP COLUMN` (no column)."""

    def at_token(text: str, after: int = 0):
        tok = next((t for t in tokens if t.start >= after and t.text.upper() == text), None)
        if tok is None:
            return SqlSyntaxError("syntax error at end of input",
                                  position=len(sql.rstrip().rstrip(";").rstrip()) + 1)
        return SqlSyntaxError(f'syntax error at or near "{sql[tok.start:tok.end + 1]}"',
                              position=tok.start + 1)

    def after(word: str):
        """The error at the token after the last `word` (or at end of input)."""
        idx = [i for i, t in enumerate(tokens) if t.text.upper() == word]
        nxt = tokens[idx[-1] + 1] if idx and idx[-1] + 1 < len(tokens) else None
        if nxt is None or nxt.token_type == TokenType.SEMICOLON:
            return at_token("\0")
        return at_token(nxt.text.upper(), nxt.start)

    for stmt in stmts:
        if stmt is None:
            continue
        if isinstance(stmt, exp.Update) and not stmt.expressions:
            raise after("SET")
        if isinstance(stmt, exp.Insert):
            first = tokens[0] if tokens else None
            if first is not None and first.token_type == TokenType.INSERT and \
                    len(tokens) > 1 and tokens[1].token_type != TokenType.INTO:
                raise at_token(tokens[1].text.upper(), tokens[1].start)   # INSERT t ...
            if stmt.expression is None and not stmt.args.get("default"):
                raise at_token("\0")                                      # INSERT INTO t
        if isinstance(stmt, exp.Alter):
            for action in stmt.args.get("actions") or []:
                if isinstance(action, exp.Drop) and action.this is None and \
                        not action.args.get("tables"):
                    raise at_token("\0")                # ALTER TABLE t DROP COLUMN
        for g in stmt.find_all(exp.Group):
            if not g.expressions and not g.args.get("grouping_sets") and \
                    not g.args.get("rollup") and not g.args.get("cube") and \
                    not g.args.get("all"):
                raise after("GROUP BY")
        for a in stmt.find_all(exp.TableAlias):
            ident = a.this
            if isinstance(ident, exp.Identifier) and not ident.quoted and \
                    ident.name.upper() in _RESERVED:
                raise at_token(ident.name.upper())


def parse_sql(sql: str) -> list[exp.Expr]:
    """The statements of `sql`, each parsed once into its node (the front door: queries,
    DML, DDL, and the session commands of planner/commands.py); a syntax error becomes
    SqlSyntaxError (42601) in PostgreSQL's words with a position (`syntax_error`)."""
    dialect = KuduSQL()
    try:
        tokens = dialect.tokenize(sql)
        check_statement_starts(tokens, sql)
        # a trailing comment after the last ";" parses as a bare exp.Semicolon
        stmts = dialect.parser().parse(tokens, sql)
        check_complete(stmts, tokens, sql)
        return [e for e in stmts if e is not None and not isinstance(e, exp.Semicolon)]
    except (ParseError, TokenError) as e:
        raise syntax_error(sql, e) from None


def check_statement_starts(tokens: list[Token], sql: str) -> None:
    """Raise the syntax error for a statement beginning with a word no statement begins
    with (before sqlglot reads it as a bare expression)."""
    if _first_bad_start(tokens) is not None:
        raise syntax_error(sql)
