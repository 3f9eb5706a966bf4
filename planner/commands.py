"""PostgreSQL's session commands as statement nodes: what the dialect makes of them, and their
grammars.

The dialect (planner/dialect.py, `Parser._parse_statement`) hands the text of a statement
that starts with one of these words to its grammar here (`GRAMMARS`: first word ->
grammar; CREATE / ALTER / DROP followed by one of `ROLE_WORDS` -> `parse_role`); the
grammar reads it with planner.words and returns the node. Every node keeps `text` (the statement as written; the
generator prints it back) and `verb` (its first word(s), for "VERB is not supported").
Error positions are 1-based into `text`; the dialect moves them into the string it parses.

    BEGIN | START TRANSACTION ... | COMMIT | END | ROLLBACK | ABORT [WORK | TRANSACTION]
    SAVEPOINT s | RELEASE [SAVEPOINT] s | ROLLBACK [WORK] TO [SAVEPOINT] s
                                              -> KuduTransaction(verb, name)
    SET [SESSION | LOCAL] name {TO | =} value, ... | DEFAULT | SET TIME ZONE v | SET NAMES v
      | SET SCHEMA v | SET TRANSACTION ... | SET SESSION CHARACTERISTICS ...
                                              -> KuduSet(name, value | None = DEFAULT, noop)
                                                 (READ ONLY / WRITE of SET TRANSACTION:
                                                 transaction_read_only, of SESSION
                                                 CHARACTERISTICS: its default)
    RESET name | RESET ALL                    -> KuduReset(name | None = ALL)
    SHOW name | SHOW ALL                      -> KuduShowSetting(name | None = ALL)
                                                 (SHOW TABLES, SHOW COLUMNS ... are KuduShow)
    CREATE | ALTER USER | ROLE name [WITH] [PASSWORD 'p' | NULL] [[NO]SUPERUSER] [[NO]LOGIN]
      ... | DROP USER | ROLE [IF EXISTS] name, ...
                                              -> KuduRole(verb, names, options, if_exists,
                                                          rename)
    DECLARE c [BINARY] [INSENSITIVE] [[NO] SCROLL] CURSOR [WITH[OUT] HOLD] FOR query
                                              -> KuduDeclare(name, hold, binary, query =
                                                 the query's node, query_offset)
    FETCH | MOVE [direction] [FROM | IN] c    -> KuduFetch(name, move, kind, count)
    CLOSE c | CLOSE ALL                       -> KuduClose(name | None = ALL)
    DISCARD ALL | PLANS | SEQUENCES | TEMP    -> KuduDiscard(what)
    LISTEN c | NOTIFY c [, 'payload'] | UNLISTEN c | *
                                              -> KuduListen(verb, channel)
    COPY t [(cols)] FROM STDIN | TO STDOUT [[WITH] (options) | options]
      | COPY (query) TO STDOUT ...            -> KuduCopy(spec = CopySpec, query = the
                                                 query's node: the (query), or SELECT cols
                                                 FROM t for COPY t TO)
    EXPLAIN [ANALYZE [VERBOSE] | VERBOSE] statement
      | EXPLAIN (option [value], ...) statement
                                              -> KuduExplain(this = the statement, analyze,
                                                 verbose, options, offset of the statement
                                                 in `text`)
    UPSERT INTO ...                           -> KuduUpsert, an exp.Insert (Kudu's upsert:
                                                 insert, or update the row with that key)

Who runs them: the session (session/session.py) dispatches on the node's type. It runs
EXPLAIN, UPSERT, BEGIN / COMMIT / ROLLBACK, SET of its own settings, LISTEN / NOTIFY (0A000)
and UNLISTEN (nothing to do) itself; the wire server registers handlers for the commands
whose state is the connection's (settings, cursors, the transaction block's status, roles);
COPY is the wire's sub-protocol. A command nobody runs is 0A000 `VERB is not supported`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from sqlglot import exp

from planner.errors import SqlError
from planner.words import Token, Words

# -- nodes ----------------------------------------------------------------------------------


class KuduCommand(exp.Expression):
    """A session command: `text` as written, `verb` its first word(s) upper-cased."""

    arg_types: ClassVar[dict[str, bool]] = {"text": True, "verb": True}

    @property
    def verb(self) -> str:
        return self.args["verb"]


def _args(**extra) -> dict[str, bool]:
    return {"text": True, "verb": True, **{k: False for k in extra}}


class KuduTransaction(KuduCommand):
    """Transaction-block control; `verb` BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE or
    ROLLBACK TO (`name`: the savepoint); `word` the first word as written (END, ABORT...);
    `read_only` BEGIN's access mode (True READ ONLY, False READ WRITE, None: the default)."""

    arg_types: ClassVar[dict[str, bool]] = _args(name=1, word=1, read_only=1)


class KuduSet(KuduCommand):
    """SET name = value: `name` as written (folded), `value` the value text (a list joined by
    ", "), None for DEFAULT; `noop` for SET TRANSACTION / SESSION CHARACTERISTICS without
    an access mode (READ ONLY / READ WRITE set `transaction_read_only` /
    `default_transaction_read_only`; `verb` is 'SET TRANSACTION' for SET TRANSACTION)."""

    arg_types: ClassVar[dict[str, bool]] = _args(name=1, value=1, noop=1)


class KuduReset(KuduCommand):
    """RESET name; no name: RESET ALL."""

    arg_types: ClassVar[dict[str, bool]] = _args(name=1)


class KuduShowSetting(KuduCommand):
    """SHOW name; no name: SHOW ALL."""

    arg_types: ClassVar[dict[str, bool]] = _args(name=1)


class KuduRole(KuduCommand):
    """CREATE / ALTER / DROP USER|ROLE: `names` (one, or DROP's list), `options` a tuple of
    (option, value): ("password", str | None), ("superuser", bool), ("login", bool);
    `if_exists` (DROP), `rename` (ALTER ... RENAME, refused)."""

    arg_types: ClassVar[dict[str, bool]] = _args(names=1, options=1, if_exists=1, rename=1)


class KuduDeclare(KuduCommand):
    """DECLARE name CURSOR FOR query: `query` the query's node, `query_text` its text and
    `query_offset` where it starts in `text` (0-based)."""

    arg_types: ClassVar[dict[str, bool]] = _args(name=1, hold=1, binary=1, query=1,
                                                 query_text=1, query_offset=1)


class KuduFetch(KuduCommand):
    """FETCH / MOVE: `kind` forward | backward | absolute | relative, `count` (None = ALL)."""

    arg_types: ClassVar[dict[str, bool]] = _args(name=1, move=1, kind=1, count=1)


class KuduClose(KuduCommand):
    """CLOSE name; no name: CLOSE ALL."""

    arg_types: ClassVar[dict[str, bool]] = _args(name=1)


class KuduDiscard(KuduCommand):
    """DISCARD `what` (ALL, PLANS, SEQUENCES, TEMP, or empty)."""

    arg_types: ClassVar[dict[str, bool]] = _args(what=1)


class KuduListen(KuduCommand):
    """LISTEN / NOTIFY / UNLISTEN `channel`."""

    arg_types: ClassVar[dict[str, bool]] = _args(channel=1)


class KuduCopy(KuduCommand):
    """COPY: `spec` the CopySpec; `query` the node of what COPY TO reads, `query_text` its
    text (for COPY t TO: SELECT cols FROM t, which is not in `text`)."""

    arg_types: ClassVar[dict[str, bool]] = _args(spec=1, query=1, query_text=1)


class KuduExplain(KuduCommand):
    """EXPLAIN [options] statement: `this` the statement's node, `inner` its text, `offset`
    where it starts in `text` (0-based); `analyze` / `verbose` the options' values, `options`
    every option as given ((name, value), ...: parse_explain)."""

    arg_types: ClassVar[dict[str, bool]] = _args(this=1, analyze=1, verbose=1, options=1,
                                                 inner=1, offset=1)


class KuduUpsert(exp.Insert):
    """UPSERT INTO ...: an INSERT whose rows replace those with the same key (Kudu's
    upsert); everything that handles an exp.Insert handles it."""


# -- transaction control --------------------------------------------------------------------

def parse_transaction(sql: str) -> KuduTransaction:
    w = Words(sql)
    word = w.next().text
    name = None
    read_only = None
    if word in ("begin", "start"):
        verb = "BEGIN"
        read_only = _access_mode(w)
    elif word == "savepoint":
        verb, name = "SAVEPOINT", w.ident() or ""
    elif word == "release":
        w.accept("savepoint")
        verb, name = "RELEASE", w.ident()
    elif word in ("rollback", "abort"):
        w.accept_any("work", "transaction")
        if w.accept("to"):
            w.accept("savepoint")
            verb, name = "ROLLBACK TO", w.ident()
        else:
            verb = "ROLLBACK"
    else:                       # commit / end
        verb = "COMMIT"
    return KuduTransaction(text=sql, verb=verb, name=name, word=word.upper(),
                           read_only=read_only)


def _access_mode(w: Words) -> bool | None:
    """The last READ ONLY / READ WRITE among the transaction modes that follow: True,
    False, or None when none is given (ISOLATION LEVEL, [NOT] DEFERRABLE are accepted)."""
    mode = None
    while not w.at_end():
        t = w.next()
        if t.kind == "word" and t.text == "read":
            nxt = w.peek()
            if nxt is not None and nxt.kind == "word" and nxt.text in ("only", "write"):
                mode = w.next().text == "only"
    return mode


# -- settings -------------------------------------------------------------------------------

# multi-word names SET / SHOW / RESET accept, and the setting each means
ALIASES = {"time zone": "TimeZone", "transaction isolation level": "transaction_isolation",
           "session authorization": "session_authorization", "names": "client_encoding"}


def _setting_name(w: Words) -> str:
    for alias, name in ALIASES.items():
        if w.accept(*alias.split()):
            return name
    name = w.ident()
    if name is None:
        raise w.syntax_error('Expected a parameter name')
    return name


def parse_set(sql: str) -> KuduSet:
    w = Words(sql)
    w.accept("set")
    if w.accept("session", "characteristics"):          # ... AS TRANSACTION modes
        mode = _access_mode(w)
        if mode is None:                                # only other modes: accepted
            return KuduSet(text=sql, verb="SET", noop=True)
        return KuduSet(text=sql, verb="SET", name="default_transaction_read_only",
                       value="on" if mode else "off")
    w.accept_any("session", "local")
    if w.accept("transaction"):                         # SET TRANSACTION modes
        mode = _access_mode(w)
        return KuduSet(text=sql, verb="SET TRANSACTION", noop=mode is None,
                       name="transaction_read_only", value="on" if mode else "off")
    if w.accept("time", "zone"):
        name = "TimeZone"
    elif w.accept("names"):
        name = "client_encoding"
    elif w.accept("schema"):
        name = "search_path"
    else:
        name = w.ident()
        if name is None:
            raise w.syntax_error()
        if not w.accept_any("to", "="):
            raise w.syntax_error('Expected TO or = after the parameter name')
    if w.accept("default") or (name == "TimeZone" and w.accept("local")):
        return KuduSet(text=sql, verb="SET", name=name, value=None)
    values = []
    while not w.at_end():
        t = w.next()
        if t.kind == "op" and t.text == ",":
            continue
        if t.kind == "op" and t.text in ("-", "+"):
            nxt = w.next()
            values.append(t.text + (nxt.raw if nxt else ""))
            continue
        values.append(t.text if t.kind in ("str", "qid") else t.raw)
    if not values:
        raise w.syntax_error('SET needs a value')
    return KuduSet(text=sql, verb="SET", name=name, value=", ".join(values))


def parse_reset(sql: str) -> KuduReset:
    w = Words(sql)
    w.accept("reset")
    if w.accept("all"):
        return KuduReset(text=sql, verb="RESET")
    return KuduReset(text=sql, verb="RESET", name=_setting_name(w))


# SHOW words that are not settings: SHOW TABLES / DATABASES / SCHEMAS stay the planner's
NOT_SETTINGS = ("tables", "databases", "schemas")


def parse_show_setting(sql: str) -> KuduShowSetting | None:
    """SHOW name | SHOW ALL; None when the SHOW is not about a setting (SHOW COLUMNS FROM t,
    SHOW DATABASES ...: the planner's)."""
    w = Words(sql)
    w.accept("show")
    if w.accept("all") and w.at_end():
        return KuduShowSetting(text=sql, verb="SHOW")
    w = Words(sql)
    w.accept("show")
    name = _setting_name(w)
    if not w.at_end() or name.lower() in NOT_SETTINGS:
        return None
    return KuduShowSetting(text=sql, verb="SHOW", name=name)


# -- roles ----------------------------------------------------------------------------------

def parse_role(sql: str) -> KuduRole:
    w = Words(sql)
    verb = w.accept_any("create", "alter", "drop")
    w.accept_any("user", "role")
    if verb == "drop":
        if_exists = w.accept("if", "exists")
        names = []
        while True:
            name = w.ident()
            if name is None:
                raise w.syntax_error('Expected a role name')
            names.append(name)
            if not w.accept(","):
                break
        return KuduRole(text=sql, verb="DROP ROLE", names=tuple(names), if_exists=if_exists)
    name = w.ident()
    if name is None:
        raise w.syntax_error('Expected a role name')
    if verb == "alter" and w.accept("rename"):
        return KuduRole(text=sql, verb="ALTER ROLE", names=(name,), rename=True)
    options = []
    w.accept("with")
    while not w.at_end():
        if w.accept("encrypted") or w.accept("unencrypted"):
            pass
        if w.accept("password"):
            t = w.next()
            if t is not None and t.kind == "word" and t.text == "null":
                options.append(("password", None))
            elif t is not None and t.kind == "str":
                options.append(("password", t.text))
            else:
                if t is not None:
                    w.i -= 1             # point at the token after PASSWORD
                raise w.syntax_error("PASSWORD takes a string or NULL")
            continue
        opt = w.accept_any("superuser", "nosuperuser", "login", "nologin")
        if opt is not None:
            options.append((opt.removeprefix("no"), not opt.startswith("no")))
            continue
        t = w.next()
        if t.kind != "word":
            raise SqlError(f'syntax error at or near "{t.raw}"', "42601", t.pos + 1)
        if t.text in ("valid", "connection", "in", "role", "admin", "user", "sysid"):
            # VALID UNTIL 'x', CONNECTION LIMIT n, IN ROLE r, ...: accepted, ignored
            while not w.at_end() and w.peek().kind != "word":
                w.next()
            w.next()
    return KuduRole(text=sql, verb=f"{verb.upper()} ROLE", names=(name,),
                    options=tuple(options))


# -- cursors --------------------------------------------------------------------------------

def parse_declare(sql: str) -> KuduDeclare:
    """The cursor's options and where its query starts; the dialect parses the query."""
    w = Words(sql)
    w.accept("declare")
    name = w.ident()
    if name is None:
        raise w.syntax_error('Expected a cursor name')
    binary = hold = False
    while True:
        opt = w.accept_any("binary", "insensitive", "asensitive", "scroll", "no")
        if opt is None:
            break
        if opt == "binary":
            binary = True
        elif opt == "no":
            w.accept("scroll")
    if not w.accept("cursor"):
        raise w.syntax_error('Expected CURSOR')
    if w.accept("with", "hold"):
        hold = True
    else:
        w.accept("without", "hold")
    if not w.accept("for"):
        raise w.syntax_error('Expected FOR')
    t = w.peek()
    if t is None:
        raise SqlError("syntax error at end of input", "42601", len(sql) + 1)
    return KuduDeclare(text=sql, verb="DECLARE", name=name, hold=hold, binary=binary,
                       query_text=w.rest(), query_offset=t.pos)


def _count(w: Words) -> int | None:
    t = w.peek()
    if t is not None and t.kind == "num":
        w.next()
        return int(float(t.text))
    if t is not None and t.kind == "op" and t.text == "-":
        w.next()
        n = w.next()
        return -int(float(n.text)) if n is not None and n.kind == "num" else 0
    if w.accept("all"):
        return None
    return 1


def parse_fetch(sql: str) -> KuduFetch:
    w = Words(sql)
    move = w.accept_any("fetch", "move") == "move"
    kind, count = "forward", 1
    d = w.accept_any("next", "prior", "first", "last", "absolute", "relative", "all",
                     "forward", "backward")
    if d == "next":
        pass
    elif d == "prior":
        kind = "backward"
    elif d == "first":
        kind, count = "absolute", 1
    elif d == "last":
        kind, count = "absolute", -1
    elif d in ("absolute", "relative"):
        kind, count = d, _count(w)
    elif d == "all":
        count = None
    elif d in ("forward", "backward"):
        kind = d
        t = w.peek()
        count = _count(w) if t is not None and (t.kind == "num" or t.text in ("all", "-")) \
            else 1
    else:
        t = w.peek()
        if t is not None and (t.kind == "num" or (t.kind == "op" and t.text == "-")):
            count = _count(w)
            if count is not None and count < 0:
                kind, count = "backward", -count
    w.accept_any("from", "in")
    name = w.ident()
    if name is None or not w.at_end():
        raise w.syntax_error('FETCH [direction] [FROM | IN] cursor')
    return KuduFetch(text=sql, verb="MOVE" if move else "FETCH", name=name, move=move,
                     kind=kind, count=count)


def parse_close(sql: str) -> KuduClose:
    w = Words(sql)
    w.accept("close")
    if w.accept("all") and w.at_end():
        return KuduClose(text=sql, verb="CLOSE")
    name = w.ident()
    if name is None or not w.at_end():
        raise w.syntax_error('CLOSE takes a cursor name or ALL')
    return KuduClose(text=sql, verb="CLOSE", name=name)


def parse_discard(sql: str) -> KuduDiscard:
    w = Words(sql)
    w.accept("discard")
    t = w.next()
    what = t.text.upper() if t is not None and t.kind == "word" else ""
    return KuduDiscard(text=sql, verb="DISCARD", what=what)


def parse_listen(sql: str) -> KuduListen:
    w = Words(sql)
    verb = w.next().text.upper()
    t = w.next()
    return KuduListen(text=sql, verb=verb, channel=t.text if t is not None else None)


# -- COPY -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CopySpec:
    table: str | None          # normalised table name (COPY table ...)
    table_sql: str | None      # the table reference as written (for SELECT ... FROM it)
    columns: tuple[str, ...] | None
    query: str | None          # COPY (query) TO
    query_offset: int
    direction: str             # "from" | "to"
    format: str = "text"       # text | csv | binary
    delimiter: str = "\t"
    null: str = "\\N"
    header: bool = False
    quote: str = '"'
    escape: str = '"'
    force_quote: tuple[str, ...] | bool = ()

    def select_sql(self) -> str:
        """What COPY TO reads: the (query), or SELECT the columns FROM the table."""
        if self.query is not None:
            return self.query
        cols = ", ".join('"' + c.replace('"', '""') + '"' for c in self.columns) \
            if self.columns else "*"
        return f"SELECT {cols} FROM {self.table_sql}"


def _char(w: Words, what: str) -> str:
    t = w.next()
    if t is None or t.kind != "str":
        raise SqlError(f"COPY {what} must be a quoted string", "42601", w.position())
    return t.text


def _bool_opt(w: Words) -> bool:
    t = w.peek()
    if t is not None and (t.kind == "str" or (t.kind in ("word", "num") and t.text in (
            "true", "false", "on", "off", "1", "0", "match"))):
        w.next()
        return t.text.lower() in ("true", "on", "1", "match")
    return True


def parse_copy(sql: str) -> KuduCopy:
    """COPY's spec; the dialect parses what COPY TO reads (`CopySpec.select_sql`)."""
    return KuduCopy(text=sql, verb="COPY", spec=copy_spec(sql))


def copy_spec(sql: str) -> CopySpec:
    w = Words(sql)
    w.accept("copy")
    table = table_sql = query = None
    columns = None
    qoff = 0
    t = w.peek()
    if t is not None and t.kind == "op" and t.text == "(":
        start, end = w.group()          # the (query), whatever operators it uses
        body = sql[start + 1:end]
        query = body.strip()
        qoff = start + 1 + (len(body) - len(body.lstrip()))
    else:
        start = w.peek()
        table = w.ident()
        if table is None:
            raise w.syntax_error('COPY needs a table or a (query)')
        table_sql = sql[start.pos:start.pos + len(start.raw)]
        if "." in table and start.kind == "word":      # schema-qualified: public.t
            schema, _, name = table.rpartition(".")
            if schema not in ("public", "pg_catalog"):
                raise SqlError(f'schema "{schema}" does not exist', "3F000", start.pos + 1)
            table = name
            table_sql = start.raw.rsplit(".", 1)[1]
        if w.accept("("):
            cols = []
            while True:
                c = w.ident()
                if c is None:
                    raise w.syntax_error('Expected a column name')
                cols.append(c)
                if w.accept(")"):
                    break
                if not w.accept(","):
                    raise w.syntax_error('Expected , or )')
            columns = tuple(cols)
    direction = w.accept_any("from", "to")
    if direction is None:
        raise w.syntax_error('Expected FROM or TO')
    if query is not None and direction == "from":
        raise SqlError("COPY (query) FROM is not supported: COPY a table FROM STDIN", "0A000")
    target = w.next()
    want = "stdin" if direction == "from" else "stdout"
    if target is None or target.kind != "word" or target.text != want:
        raise SqlError(f"COPY {direction.upper()} a file or program is not supported by "
                       f"kudusql: use {want.upper()} (psql's \\copy sends the file through "
                       "it)", "0A000", target.pos + 1 if target else None)
    opts: dict = {}
    w.accept("with")
    if w.accept("("):
        while not w.accept(")"):
            name = w.next()
            if name is None:
                raise w.syntax_error("COPY options end with )")
            key = name.text.lower()
            if key == "format":
                v = w.next()
                opts["format"] = (v.text if v else "").lower()
            elif key in ("delimiter", "null", "quote", "escape", "encoding"):
                opts[key] = _char(w, key.upper())
            elif key == "header":
                opts["header"] = _bool_opt(w)
            elif key in ("force_quote",):
                if w.accept("*"):
                    opts["force_quote"] = True
                else:
                    w.accept("(")
                    fq = []
                    while not w.accept(")"):
                        c = w.ident()
                        if c is None:
                            w.next()
                        else:
                            fq.append(c)
                    opts["force_quote"] = tuple(fq)
            elif key == "freeze":
                _bool_opt(w)
            else:
                raise SqlError(f'option "{key}" not recognized', "42601", name.pos + 1)
            w.accept(",")
    else:
        while not w.at_end():
            k = w.accept_any("binary", "csv", "header", "delimiter", "null", "quote",
                             "escape", "force", "encoding", "freeze")
            if k is None:
                t = w.peek()
                raise SqlError(f'syntax error at or near "{t.raw}"', "42601", t.pos + 1)
            if k in ("binary", "csv"):
                opts["format"] = k
            elif k == "header":
                opts["header"] = True
            elif k == "freeze":
                pass
            elif k == "force":
                w.accept_any("quote")
                if w.accept("*"):
                    opts["force_quote"] = True
                else:
                    fq = []
                    while (c := w.ident()) is not None:
                        fq.append(c)
                        if not w.accept(","):
                            break
                    opts["force_quote"] = tuple(fq)
            else:
                w.accept("as")
                opts[k] = _char(w, k.upper())
    fmt = opts.get("format", "text")
    if fmt not in ("text", "csv", "binary"):
        raise SqlError(f'COPY format "{fmt}" not recognized', "22023")
    enc = opts.pop("encoding", "utf8").lower().replace("-", "")
    if enc not in ("utf8", "unicode"):
        raise SqlError("COPY supports ENCODING 'UTF8' only", "0A000")
    spec: dict = {"format": fmt}
    if fmt == "csv":
        spec.update(delimiter=",", null="")
    for k in ("delimiter", "null", "header", "quote", "escape", "force_quote"):
        if k in opts:
            spec[k] = opts[k]
    if "escape" not in opts and "quote" in opts:
        spec["escape"] = opts["quote"]
    if fmt == "binary" and any(k in opts for k in ("delimiter", "null", "header")):
        raise SqlError("cannot specify DELIMITER, NULL or HEADER in BINARY mode", "42601")
    if len(spec.get("delimiter", "\t")) != 1:
        raise SqlError("COPY delimiter must be a single one-byte character", "0A000")
    if fmt != "csv" and ("quote" in opts or "escape" in opts or "force_quote" in opts):
        raise SqlError("COPY QUOTE, ESCAPE and FORCE_QUOTE are available only in CSV mode",
                       "0A000")
    if direction == "from" and "force_quote" in opts:
        raise SqlError("COPY FORCE_QUOTE is available only with COPY TO", "0A000")
    return CopySpec(table, table_sql, columns, query, qoff, direction, **spec)


# -- EXPLAIN --------------------------------------------------------------------------------

# EXPLAIN's options, PostgreSQL's: booleans but FORMAT. ANALYZE runs the statement; the
# others are accepted and change nothing (kudusql's plans show no costs, buffers or summary).
EXPLAIN_OPTIONS = ("analyze", "verbose", "costs", "buffers", "timing", "summary", "format")
# what may follow EXPLAIN's "(" when it opens a parenthesised query, not the options
_QUERY_START = ("select", "with", "values", "table", "(")


def _explain_boolean(t: Token) -> bool | None:
    """An option's boolean as PostgreSQL reads it (defGetBoolean): true / false / on / off
    (words or strings, any case), 1 / 0; None for anything else."""
    text = t.text.lower() if t.kind in ("word", "str") else t.text if t.kind == "num" else ""
    return {"true": True, "on": True, "1": True,
            "false": False, "off": False, "0": False}.get(text)


def _explain_option(w: Words) -> tuple[str, bool | str]:
    """One `option [value]` of EXPLAIN (...)."""
    t = w.peek()
    if t is None or t.kind != "word":
        raise w.syntax_error()
    w.next()
    name = "analyze" if t.text == "analyse" else t.text
    v = w.peek()
    value = None if v is None or (v.kind == "op" and v.text in (",", ")")) else w.next()
    if name not in EXPLAIN_OPTIONS:
        raise SqlError(f'unrecognized EXPLAIN option "{name}"', "42601", t.pos + 1)
    if name == "format":
        if value is None:
            raise SqlError("format requires a parameter", "42601", t.pos + 1)
        fmt = value.text.lower()
        if fmt in ("json", "xml", "yaml"):
            raise SqlError(f"EXPLAIN (FORMAT {fmt.upper()}) is not supported: kudusql writes "
                           "plans as text (FORMAT TEXT)", "0A000", value.pos + 1)
        if fmt != "text":
            raise SqlError(f'unrecognized value for EXPLAIN option "format": "{value.text}"',
                           "22023", value.pos + 1)
        return name, "text"
    if value is None:
        return name, True
    b = _explain_boolean(value)
    if b is None:
        raise SqlError(f"{name} requires a Boolean value", "42601", value.pos + 1)
    return name, b


def parse_explain(sql: str) -> KuduExplain:
    """EXPLAIN's options and where its statement starts; the dialect parses the statement.

        EXPLAIN [ANALYZE [VERBOSE] | VERBOSE] statement
        EXPLAIN (option [value], ...) statement    -- option: EXPLAIN_OPTIONS

    `analyze` is the value of ANALYZE (`EXPLAIN (ANALYZE false)` is a plain EXPLAIN),
    `options` each option as given, in order; `offset` is where the statement's text
    starts, just after the last token of EXPLAIN's options (`inner` is the text from there).
    """
    w = Words(sql)
    w.accept("explain")
    options: list[tuple[str, bool | str]] = []
    t, after = w.peek(), w.peek(1)
    if w.accept_any("analyze", "analyse"):
        options.append(("analyze", True))
        if w.accept("verbose"):
            options.append(("verbose", True))
    elif w.accept("verbose"):
        options.append(("verbose", True))
    elif t is not None and t.kind == "op" and t.text == "(" and not (
            after is not None and after.kind in ("word", "op") and after.text in _QUERY_START):
        w.next()
        while True:
            options.append(_explain_option(w))
            if w.accept(")"):
                break
            if not w.accept(","):
                raise w.syntax_error()
    last = w.toks[w.i - 1]                  # EXPLAIN or the last token of its options
    nxt = w.peek()
    if nxt is None or (nxt.kind == "word" and nxt.text in ("analyze", "analyse", "verbose")):
        raise w.syntax_error()              # no statement; or VERBOSE ANALYZE (PG's order)
    given = dict(options)
    analyze = bool(given.get("analyze", False))
    if given.get("timing") is True and not analyze:
        raise SqlError("EXPLAIN option TIMING requires ANALYZE", "22023")
    offset = last.pos + len(last.raw)
    return KuduExplain(text=sql, verb="EXPLAIN", analyze=analyze,
                       verbose=bool(given.get("verbose", False)), options=tuple(options),
                       inner=sql[offset:], offset=offset)


# first word -> grammar (CREATE / ALTER / DROP take USER or ROLE next: see ROLE_WORDS)
GRAMMARS = {
    "BEGIN": parse_transaction, "START": parse_transaction, "COMMIT": parse_transaction,
    "END": parse_transaction, "ROLLBACK": parse_transaction, "ABORT": parse_transaction,
    "SAVEPOINT": parse_transaction, "RELEASE": parse_transaction,
    "SET": parse_set, "RESET": parse_reset,
    "DECLARE": parse_declare, "FETCH": parse_fetch, "MOVE": parse_fetch,
    "CLOSE": parse_close, "DISCARD": parse_discard,
    "LISTEN": parse_listen, "NOTIFY": parse_listen, "UNLISTEN": parse_listen,
    "COPY": parse_copy, "EXPLAIN": parse_explain,
}
ROLE_WORDS = ("USER", "ROLE")
