"""KuduSQL: the sqlglot dialect of kudusql — Postgres, plus Impala's DDL for Kudu tables.

The dialect subclasses sqlglot's Postgres dialect and only *extends* its class-level tables
(`Tokenizer.KEYWORDS`, `Parser.PROPERTY_PARSERS` / `CONSTRAINT_PARSERS`,
`Generator.TRANSFORMS` / `PROPERTIES_LOCATION`); no parser method is rewritten wholesale.

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

Parse errors carry the 0-based character offset of the offending token in
`ParseError.errors[i]["start"]` (see `KuduSQL.Parser.raise_error`), so callers need not
convert sqlglot's line/column.

Not done here: ALTER TABLE ... RANGE PARTITION, CTAS and CREATE EXTERNAL TABLE (they parse
as whatever Postgres makes of them, usually `exp.Command`).
"""

from __future__ import annotations

from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

# -- nodes ----------------------------------------------------------------------------------


class KuduHashPartition(exp.Expression):
    """`HASH [(cols)] PARTITIONS n`; no columns = every primary key column."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": False, "buckets": True}


class KuduRangeBound(exp.Expression):
    """One `PARTITION ...` of a RANGE clause.

    `value` (`PARTITION VALUE = v`) or `lower`/`upper` with ops "<" or "<=" (either may be
    absent = unbounded); `hash`: a range-specific hash schema (Kudu >= 1.17).
    """

    arg_types: ClassVar[dict[str, bool]] = {
        "value": False,
        "lower": False,
        "lower_op": False,
        "upper": False,
        "upper_op": False,
        "hash": False,
    }


class KuduRangePartition(exp.Expression):
    """`RANGE [(cols)] (bound, ...)`; no columns = every primary key column."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": False, "bounds": False}


class KuduPartitionByProperty(exp.Property):
    """Impala's `PARTITION BY` for Kudu: hash levels, then at most one range level."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": True}


class KuduDistributeByProperty(exp.Property):
    """The Kudu paper's `DISTRIBUTE BY HASH (cols) INTO n BUCKETS`."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": False, "buckets": True}


class KuduEncodingColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class KuduCompressionColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class KuduBlockSizeColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class KuduNonUniquePrimaryKeyColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    arg_types: ClassVar[dict[str, bool]] = {}


# -- parser helpers -------------------------------------------------------------------------

_RANGE_OPS = {TokenType.LT: "<", TokenType.LTE: "<="}


def _parse_optional_columns(self: Parser) -> list[exp.Expr]:
    if self._curr and self._curr.token_type == TokenType.L_PAREN:
        return self._parse_wrapped_id_vars()
    return []


def _parse_hash(self: Parser) -> KuduHashPartition:
    # "HASH" already consumed
    token = self._prev
    cols = _parse_optional_columns(self)
    if not self._match_text_seq("PARTITIONS"):
        self.raise_error("Expected PARTITIONS")
    return self.expression(KuduHashPartition(expressions=cols, buckets=_expect_number(self)),
                           token=token)


def _expect_number(self: Parser) -> exp.Expr | None:
    n = self._parse_number()
    if n is None:
        self.raise_error("Expected a number")
    return n


def _parse_bound_value(self: Parser) -> exp.Expr | None:
    # _parse_bitwise stops before comparison operators: `10 <= VALUES` leaves `<=`.
    v = self._parse_bitwise()
    if v is None:
        self.raise_error("Expected a constant")
    return v


def _parse_range_op(self: Parser) -> str | None:
    if self._match_set(tuple(_RANGE_OPS)):
        return _RANGE_OPS[self._prev.token_type]
    return None


def _parse_range_bound(self: Parser) -> KuduRangeBound | None:
    if not self._match(TokenType.PARTITION):
        self.raise_error("Expected PARTITION")
    token = self._prev
    args: dict = {}
    if self._match_text_seq("VALUE"):
        if not self._match(TokenType.EQ):
            self.raise_error("Expected =")
        args["value"] = _parse_bound_value(self)
    else:
        if not self._match(TokenType.VALUES):
            args["lower"] = _parse_bound_value(self)
            args["lower_op"] = _parse_range_op(self)
            if args["lower_op"] is None:
                self.raise_error("Expected < or <=")
            if not self._match(TokenType.VALUES):
                self.raise_error("Expected VALUES")
        op = _parse_range_op(self)
        if op is not None:
            args["upper_op"] = op
            args["upper"] = _parse_bound_value(self)
        elif "lower" not in args:
            self.raise_error("Expected < or <=")
    hashes = []
    while self._match_text_seq("HASH"):
        hashes.append(_parse_hash(self))
    if hashes:
        args["hash"] = hashes
    return self.expression(KuduRangeBound(**args), token=token)


def _parse_range(self: Parser) -> KuduRangePartition:
    # "RANGE" already consumed
    cols = _parse_optional_columns(self)
    bounds = self._parse_wrapped_csv(lambda: _parse_range_bound(self))
    return self.expression(KuduRangePartition(expressions=cols, bounds=bounds))


def _parse_kudu_partition_by(self: Parser) -> KuduPartitionByProperty:
    levels: list[exp.Expr] = []
    while True:
        if self._match_text_seq("HASH"):
            levels.append(_parse_hash(self))
        elif self._match_text_seq("RANGE"):
            levels.append(_parse_range(self))
            break  # RANGE is last
        else:
            self.raise_error("Expected HASH or RANGE")
            break
        # `, HASH` / `, RANGE` continues the clause; any other comma belongs to the caller.
        if (self._curr and self._curr.token_type == TokenType.COMMA and self._next
                and self._next.text.upper() in ("HASH", "RANGE")):
            self._advance()
        else:
            break
    return self.expression(KuduPartitionByProperty(expressions=levels))


def _parse_kudu_distribute_by(self: Parser) -> KuduDistributeByProperty:
    if not self._match_text_seq("HASH"):
        self.raise_error("Expected HASH")
    cols = _parse_optional_columns(self)
    if not self._match_text_seq("INTO"):
        self.raise_error("Expected INTO")
    n = _expect_number(self)
    if not self._match_text_seq("BUCKETS"):
        self.raise_error("Expected BUCKETS")
    return self.expression(KuduDistributeByProperty(expressions=cols, buckets=n))


def _parse_name(self: Parser) -> exp.Expr | None:
    v = self._parse_var(any_token=True) or self._parse_string()
    if v is None:
        self.raise_error("Expected a name")
    else:
        v.update_positions(self._prev)  # so errors about the name can point at it
    return v


def _parse_non_unique(self: Parser) -> exp.Expr | None:
    if self._match(TokenType.UNIQUE) and self._match(TokenType.PRIMARY_KEY):
        return self.expression(KuduNonUniquePrimaryKeyColumnConstraint())
    self.raise_error("Expected UNIQUE PRIMARY KEY")
    return None


# -- generator helpers ----------------------------------------------------------------------

def _hash_sql(self: Generator, e: KuduHashPartition) -> str:
    cols = self.expressions(e, flat=True)
    return f"HASH{f' ({cols})' if cols else ''} PARTITIONS {self.sql(e, 'buckets')}"


def _bound_sql(self: Generator, e: KuduRangeBound) -> str:
    if e.args.get("value") is not None:
        s = f"PARTITION VALUE = {self.sql(e, 'value')}"
    else:
        s = "PARTITION "
        if e.args.get("lower") is not None:
            s += f"{self.sql(e, 'lower')} {e.args['lower_op']} "
        s += "VALUES"
        if e.args.get("upper") is not None:
            s += f" {e.args['upper_op']} {self.sql(e, 'upper')}"
    for h in e.args.get("hash") or []:
        s += " " + self.sql(h)
    return s


def _range_sql(self: Generator, e: KuduRangePartition) -> str:
    cols = self.expressions(e, flat=True)
    bounds = ", ".join(self.sql(b) for b in e.args.get("bounds") or [])
    return f"RANGE{f' ({cols})' if cols else ''} ({bounds})"


def _property_sql(self: Generator, e: exp.Property) -> str:
    # keep a TBLPROPERTIES string key quoted: WITH ('kudu.num_tablet_replicas'='3')
    key = e.this
    k = self.sql(key) if isinstance(key, exp.Literal) else e.name
    return f"{k}={self.sql(e, 'value')}"


class KuduSQL(Postgres):
    class Tokenizer(Postgres.Tokenizer):
        KEYWORDS: ClassVar[dict] = {
            **Postgres.Tokenizer.KEYWORDS,
            "FLOAT": TokenType.FLOAT,  # Impala: 4-byte float (Postgres: double precision)
            "STRING": TokenType.TEXT,
            "BINARY": TokenType.VARBINARY,
        }

    class Parser(Postgres.Parser):
        PROPERTY_PARSERS: ClassVar[dict] = {
            **Postgres.Parser.PROPERTY_PARSERS,
            "PARTITION BY": _parse_kudu_partition_by,
            "DISTRIBUTE BY": _parse_kudu_distribute_by,
        }

        CONSTRAINT_PARSERS: ClassVar[dict] = {
            **Postgres.Parser.CONSTRAINT_PARSERS,
            "ENCODING": lambda self: self.expression(
                KuduEncodingColumnConstraint(this=_parse_name(self))),
            "COMPRESSION": lambda self: self.expression(
                KuduCompressionColumnConstraint(this=_parse_name(self))),
            "BLOCK_SIZE": lambda self: self.expression(
                KuduBlockSizeColumnConstraint(this=_expect_number(self))),
            "NON": _parse_non_unique,
        }

        def _parse_as_command(self, start: Token) -> exp.Command:
            """A CREATE TABLE sqlglot cannot parse is a syntax error here, not a Command."""
            if start.token_type == TokenType.CREATE and self._curr:
                i = next((i for i, t in enumerate(self._tokens) if t is start), None)
                if i is not None and any(t.token_type == TokenType.TABLE
                                         for t in self._tokens[i + 1:i + 4]):
                    self.raise_error(f'syntax error at or near "{self._curr.text}"')
            return super()._parse_as_command(start)

        def raise_error(self, message: str, token: Token | None = None) -> None:  # type: ignore[override]
            """As sqlglot's, and record the token's character offset as `start`."""
            at_end = not token and not self._curr
            token = token or self._curr or self._prev or Token.string("")
            # out of input: point just past the last token, as PostgreSQL does
            start = token.end + 1 if at_end and token else token.start
            n = len(self.errors)
            try:
                super().raise_error(message, token)
            except ParseError as e:
                for d in e.errors:
                    d.setdefault("start", start)
                raise
            for err in self.errors[n:]:
                for d in err.errors:
                    d.setdefault("start", start)

    class Generator(Postgres.Generator):
        TRANSFORMS: ClassVar[dict] = {
            **Postgres.Generator.TRANSFORMS,
            exp.FileFormatProperty: lambda self, e: f"STORED AS {self.sql(e, 'this')}",
            exp.Property: _property_sql,
            exp.SchemaCommentProperty: lambda self, e: f"COMMENT {self.sql(e, 'this')}",
            KuduHashPartition: _hash_sql,
            KuduRangeBound: _bound_sql,
            KuduRangePartition: _range_sql,
            KuduPartitionByProperty: lambda self, e: "PARTITION BY "
            + ", ".join(self.sql(x) for x in e.expressions),
            KuduDistributeByProperty: lambda self, e: "DISTRIBUTE BY HASH"
            + (f" ({self.expressions(e, flat=True)})" if e.expressions else "")
            + f" INTO {self.sql(e, 'buckets')} BUCKETS",
            KuduEncodingColumnConstraint: lambda self, e: f"ENCODING {self.sql(e, 'this')}",
            KuduCompressionColumnConstraint: lambda self, e:
                f"COMPRESSION {self.sql(e, 'this')}",
            KuduBlockSizeColumnConstraint: lambda self, e: f"BLOCK_SIZE {self.sql(e, 'this')}",
            KuduNonUniquePrimaryKeyColumnConstraint: lambda self, e: "NON UNIQUE PRIMARY KEY",
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
        }


Parser = KuduSQL.Parser
Generator = KuduSQL.Generator
