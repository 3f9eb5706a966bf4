"""Impala's DDL for Kudu tables, as KuduSQL dialect pieces: nodes, parsers, SQL text.

The partitioning clauses of CREATE TABLE (`PARTITION BY HASH ... RANGE ...`, `DISTRIBUTE
BY`, a table-level `PRIMARY KEY (...)`), the column attributes (ENCODING, COMPRESSION,
BLOCK_SIZE, NON UNIQUE PRIMARY KEY) and the ALTER TABLE actions (ADD / DROP RANGE
PARTITION, ADD COLUMNS, CHANGE, UNSET TBLPROPERTIES): the node classes, the parser
functions planner/dialect.py puts in `KuduSQL.Parser`'s tables, and the generator
functions it puts in `KuduSQL.Generator.TRANSFORMS`. The grammar and the node tree are in
planner/dialect.py's docstring; planner.ddl and planner.utility run the nodes.

These are functions of sqlglot's Parser / Generator (`self`), public because the dialect
puts them in its tables, and imported by nothing else; they import no other planner module
but planner.errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from sqlglot import exp
from sqlglot.tokens import TokenType

if TYPE_CHECKING:
    from sqlglot.generator import Generator
    from sqlglot.parser import Parser

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


class KuduPrimaryKeyProperty(exp.Property):
    """Impala's CREATE TABLE AS SELECT key clause: `CREATE TABLE t PRIMARY KEY (a, b)
    PARTITION BY ... AS SELECT ...`."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": True}


def parse_kudu_primary_key(self: Parser) -> KuduPrimaryKeyProperty:
    return self.expression(KuduPrimaryKeyProperty(
        expressions=self._parse_wrapped_csv(self._parse_id_var)))


class KuduEncodingColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class KuduCompressionColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class KuduBlockSizeColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class KuduNonUniquePrimaryKeyColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    arg_types: ClassVar[dict[str, bool]] = {}


class KuduAddRangePartition(exp.Expression):
    """ALTER TABLE ... ADD [IF NOT EXISTS] RANGE PARTITION `this` (a KuduRangeBound)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False}


class KuduDropRangePartition(exp.Expression):
    """ALTER TABLE ... DROP [IF EXISTS] RANGE PARTITION `this` (a KuduRangeBound)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False}


class KuduChangeColumn(exp.Expression):
    """Impala's ALTER TABLE ... CHANGE [COLUMN] `this` `expression` (new name, type ...)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True}


class KuduUnsetProperties(exp.Expression):
    """ALTER TABLE ... UNSET TBLPROPERTIES [IF EXISTS] ('k', ...)."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": True, "exists": False}


# -- parser helpers -------------------------------------------------------------------------

def raise_syntax_error(self: Parser, expected: str) -> None:
    """A syntax error raised by this dialect's grammar: the message is PostgreSQL's
    `syntax error at or near ...` (see `syntax_error`); `expected` ("Expected PARTITIONS")
    becomes the error's hint."""
    self._kudu_hint = expected
    self.raise_error(expected)

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
        raise_syntax_error(self, "Expected PARTITIONS")
    return self.expression(KuduHashPartition(expressions=cols, buckets=expect_number(self)),
                           token=token)


def expect_number(self: Parser) -> exp.Expr | None:
    n = self._parse_number()
    if n is None:
        raise_syntax_error(self, "Expected a number")
    return n


def _parse_bound_value(self: Parser) -> exp.Expr | None:
    # _parse_bitwise stops before comparison operators: `10 <= VALUES` leaves `<=`.
    v = self._parse_bitwise()
    if v is None:
        raise_syntax_error(self, "Expected a constant")
    return v


def _parse_range_op(self: Parser) -> str | None:
    if self._match_set(tuple(_RANGE_OPS)):
        return _RANGE_OPS[self._prev.token_type]
    return None


def _parse_range_bound(self: Parser) -> KuduRangeBound | None:
    if not self._match(TokenType.PARTITION):
        raise_syntax_error(self, "Expected PARTITION")
    token = self._prev
    args: dict = {}
    if self._match_text_seq("UNBOUNDED"):
        pass  # neither bound
    elif self._match_text_seq("VALUE"):
        if not self._match(TokenType.EQ):
            raise_syntax_error(self, "Expected =")
        args["value"] = _parse_bound_value(self)
    else:
        if not self._match(TokenType.VALUES):
            args["lower"] = _parse_bound_value(self)
            args["lower_op"] = _parse_range_op(self)
            if args["lower_op"] is None:
                raise_syntax_error(self, "Expected < or <=")
            if not self._match(TokenType.VALUES):
                raise_syntax_error(self, "Expected VALUES")
        op = _parse_range_op(self)
        if op is not None:
            args["upper_op"] = op
            args["upper"] = _parse_bound_value(self)
        elif "lower" not in args:
            raise_syntax_error(self, "Expected < or <=")
    hashes = []
    while self._match_text_seq("HASH"):
        hashes.append(_parse_hash(self))
    if hashes:
        args["hash"] = hashes
    return self.expression(KuduRangeBound(**args), token=token)


def _parse_range(self: Parser) -> KuduRangePartition:
    # "RANGE" already consumed
    cols = _parse_optional_columns(self)
    if self._curr and self._next and self._match_pair(TokenType.L_PAREN, TokenType.R_PAREN):
        bounds: list = []  # `RANGE (c) ()`: no range partition at all
    else:
        bounds = self._parse_wrapped_csv(lambda: _parse_range_bound(self))
    return self.expression(KuduRangePartition(expressions=cols, bounds=bounds))


def parse_kudu_partition_by(self: Parser) -> KuduPartitionByProperty:
    levels: list[exp.Expr] = []
    while True:
        if self._match_text_seq("HASH"):
            levels.append(_parse_hash(self))
        elif self._match_text_seq("RANGE"):
            levels.append(_parse_range(self))
            break  # RANGE is last
        else:
            raise_syntax_error(self, "Expected HASH or RANGE")
            break
        # `, HASH` / `, RANGE` continues the clause; any other comma belongs to the caller.
        if (self._curr and self._curr.token_type == TokenType.COMMA and self._next
                and self._next.text.upper() in ("HASH", "RANGE")):
            self._advance()
        else:
            break
    return self.expression(KuduPartitionByProperty(expressions=levels))


def parse_kudu_distribute_by(self: Parser) -> KuduDistributeByProperty:
    if not self._match_text_seq("HASH"):
        raise_syntax_error(self, "Expected HASH")
    cols = _parse_optional_columns(self)
    if not self._match_text_seq("INTO"):
        raise_syntax_error(self, "Expected INTO")
    n = expect_number(self)
    if not self._match_text_seq("BUCKETS"):
        raise_syntax_error(self, "Expected BUCKETS")
    return self.expression(KuduDistributeByProperty(expressions=cols, buckets=n))


def parse_name(self: Parser) -> exp.Expr | None:
    v = self._parse_var(any_token=True) or self._parse_string()
    if v is None:
        raise_syntax_error(self, "Expected a name")
    else:
        v.update_positions(self._prev)  # so errors about the name can point at it
    return v


def parse_non_unique(self: Parser) -> exp.Expr | None:
    if self._match(TokenType.UNIQUE) and self._match(TokenType.PRIMARY_KEY):
        return self.expression(KuduNonUniquePrimaryKeyColumnConstraint())
    raise_syntax_error(self, "Expected UNIQUE PRIMARY KEY")
    return None


def _at_range_partition(self: Parser) -> bool:
    """After ADD/DROP [IF [NOT] EXISTS]: is `[RANGE] PARTITION` next? Consumes RANGE only
    if PARTITION follows. (Hive's `PARTITION (k = v)` means nothing for Kudu tables: a
    parenthesis after PARTITION starts a tuple bound, `PARTITION (1, 'a') <= VALUES`.)"""
    i = 1 if self._curr and self._curr.text.upper() == "RANGE" else 0
    j = self._index + i
    if j < len(self._tokens) and self._tokens[j].token_type == TokenType.PARTITION:
        self._advance(i)
        return True
    return False


def parse_kudu_alter_add(self: Parser) -> list[exp.Expr]:
    # "ADD" already consumed
    index = self._index
    exists = self._parse_exists(not_=True)
    if _at_range_partition(self):
        bound = _parse_range_bound(self)
        return [self.expression(KuduAddRangePartition(this=bound, exists=exists))]
    if exists and self._match_text_seq("COLUMNS"):  # Impala: ADD IF NOT EXISTS COLUMNS (...)
        schema = self._parse_schema()
        cols = list(schema.expressions) if isinstance(schema, exp.Schema) else []
        if not cols:
            raise_syntax_error(self, "Expected a column list")
        for c in cols:
            c.set("exists", True)
        return cols
    self._retreat(index)
    return self._parse_alter_table_add()


def parse_kudu_alter_drop(self: Parser) -> list[exp.Expr]:
    # "DROP" already consumed
    index = self._index
    exists = self._parse_exists()
    if _at_range_partition(self):
        bound = _parse_range_bound(self)
        return [self.expression(KuduDropRangePartition(this=bound, exists=exists))]
    self._retreat(index)
    return self._parse_alter_table_drop()


def parse_kudu_change(self: Parser) -> KuduChangeColumn | None:
    # "CHANGE" already consumed: CHANGE [COLUMN] old new_name type [attributes]
    self._match(TokenType.COLUMN)
    old = self._parse_id_var(any_token=False)
    new = self._parse_field_def()
    if old is None or not isinstance(new, exp.ColumnDef) or new.args.get("kind") is None:
        raise_syntax_error(self, "Expected CHANGE [COLUMN] old_name new_name type")
        return None
    return self.expression(KuduChangeColumn(this=old, expression=new))


def parse_kudu_unset(self: Parser) -> KuduUnsetProperties | None:
    # "UNSET" already consumed
    if not self._match_text_seq("TBLPROPERTIES"):
        raise_syntax_error(self, "Expected TBLPROPERTIES")
    exists = self._parse_exists()
    keys = self._parse_wrapped_csv(self._parse_string)
    return self.expression(KuduUnsetProperties(expressions=keys, exists=exists))



# -- generator helpers ----------------------------------------------------------------------
def hash_sql(self: Generator, e: KuduHashPartition) -> str:
    cols = self.expressions(e, flat=True)
    return f"HASH{f' ({cols})' if cols else ''} PARTITIONS {self.sql(e, 'buckets')}"


def bound_sql(self: Generator, e: KuduRangeBound) -> str:
    if all(e.args.get(k) is None for k in ("value", "lower", "upper")):
        s = "PARTITION UNBOUNDED"
    elif e.args.get("value") is not None:
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


def range_sql(self: Generator, e: KuduRangePartition) -> str:
    cols = self.expressions(e, flat=True)
    bounds = ", ".join(self.sql(b) for b in e.args.get("bounds") or [])
    return f"RANGE{f' ({cols})' if cols else ''} ({bounds})"


def range_ddl_sql(verb: str, exists: str):
    def gen(self: Generator, e: exp.Expr) -> str:
        bound = self.sql(e, "this")  # "PARTITION ..."
        return f"{verb}{f' {exists}' if e.args.get('exists') else ''} RANGE {bound}"

    return gen


def alterset_sql(self: Generator, e: exp.AlterSet) -> str:
    props = e.expressions
    if props and all(isinstance(p, exp.Properties) for p in props):
        items = ", ".join(self.sql(x) for p in props for x in p.expressions)
        return f"SET TBLPROPERTIES ({items})"
    return self.alterset_sql(e)


def property_sql(self: Generator, e: exp.Property) -> str:
    # keep a TBLPROPERTIES string key quoted: WITH ('kudu.num_tablet_replicas'='3')
    key = e.this
    k = self.sql(key) if isinstance(key, exp.Literal) else e.name
    return f"{k}={self.sql(e, 'value')}"
