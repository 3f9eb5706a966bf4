"""The few catalog-ish statements clients send at connect time, answered by the wire layer.

TEMPORARY: the pg_catalog / information_schema task replaces this module with real catalog
relations and functions served by the SQL engine. Until then this is a small, fixed table,
built from what the clients in ../shared/reference/pg-clients actually send:

    SELECT <item> [, <item> ...]      each item one of the functions below, optionally
                                      [AS] alias; anything else in the list -> not ours
        version() / pg_catalog.version()    'PostgreSQL 15.6 (kudusql ...) on ...'
                                            (SQLAlchemy parses "PostgreSQL 15.6")
        current_schema() / current_schema   'public'
        current_database() / current_catalog
        current_user / session_user / user
        pg_backend_pid()                    the pid in BackendKeyData
        current_setting('name')             settings.Settings (42704 if unknown)
        set_config('name', value, false)    sets it, returns the new value (asyncpg's jit
                                            dance before type introspection)
        pg_advisory_unlock_all()            no-op (asyncpg's pool reset)
    psycopg's TypeInfo.fetch query (`... FROM pg_type t WHERE t.oid = to_regtype($1)`):
        no rows, i.e. "no such type" (SQLAlchemy looks up hstore at connect)
    UNLISTEN ...                            no-op (asyncpg's pool reset)

`answer(sql, params, ctx)` returns a StatementResult, or None when the statement is not
one of these (it then goes to the session unchanged).
"""

from __future__ import annotations

import dataclasses
import re

import pyarrow as pa

from planner.errors import SqlError
from planner.result import StatementResult
from wire.lexer import LexError, Token, tokenize
from wire.settings import SERVER_VERSION, Settings

VERSION = (f"PostgreSQL {SERVER_VERSION.split()[0]} ({SERVER_VERSION.split('(')[1].rstrip(')')}) "
           "on x86_64-pc-linux-gnu, compiled by kudusql, 64-bit")


@dataclasses.dataclass
class Context:
    user: str
    database: str
    pid: int
    settings: Settings


# function name -> (column name, Arrow type, number of arguments, whether parens required)
_FUNCS = {
    "version": ("version", pa.string(), 0, True),
    "pg_catalog.version": ("version", pa.string(), 0, True),
    "current_schema": ("current_schema", pa.string(), 0, False),
    "pg_catalog.current_schema": ("current_schema", pa.string(), 0, False),
    "current_database": ("current_database", pa.string(), 0, True),
    "pg_catalog.current_database": ("current_database", pa.string(), 0, True),
    "current_catalog": ("current_catalog", pa.string(), 0, False),
    "current_user": ("current_user", pa.string(), 0, False),
    "session_user": ("session_user", pa.string(), 0, False),
    "user": ("user", pa.string(), 0, False),
    "pg_backend_pid": ("pg_backend_pid", pa.int32(), 0, True),
    "pg_catalog.pg_backend_pid": ("pg_backend_pid", pa.int32(), 0, True),
    "current_setting": ("current_setting", pa.string(), 1, True),
    "pg_catalog.current_setting": ("current_setting", pa.string(), 1, True),
    "set_config": ("set_config", pa.string(), 3, True),
    "pg_catalog.set_config": ("set_config", pa.string(), 3, True),
    "pg_advisory_unlock_all": ("pg_advisory_unlock_all", pa.string(), 0, True),
    "pg_catalog.pg_advisory_unlock_all": ("pg_advisory_unlock_all", pa.string(), 0, True),
}

# matched against the statement's tokens joined by single spaces (see `answer`)
_TYPEINFO = re.compile(r"^select typname as name , oid , typarray as array_oid , .* "
                       r"from pg_type t where t\.oid = to_regtype \(", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class _Item:
    func: str
    args: tuple[Token, ...]
    alias: str | None


def _parse_select(toks: list[Token]) -> list[_Item] | None:
    """SELECT f(args) [AS a], ... with only known functions; None otherwise."""
    if not toks or toks[0].kind != "word" or toks[0].text != "select":
        return None
    i, items = 1, []
    while True:
        if i >= len(toks) or toks[i].kind != "word" or toks[i].text not in _FUNCS:
            return None
        name = toks[i].text
        i += 1
        args: list[Token] = []
        if i < len(toks) and toks[i].raw == "(":
            i += 1
            while i < len(toks) and toks[i].raw != ")":
                t = toks[i]
                if t.kind in ("str", "param", "num") or (t.kind == "word" and t.text in (
                        "true", "false", "null")):
                    args.append(t)
                elif t.raw == "," or (t.kind == "op" and t.text == "::") or \
                        (t.kind == "word" and t.text in ("text", "bool", "boolean")):
                    pass
                else:
                    return None
                i += 1
            if i >= len(toks):
                return None
            i += 1
        elif _FUNCS[name][3]:
            return None
        if len(args) != _FUNCS[name][2]:
            return None
        alias = None
        if i < len(toks) and toks[i].kind == "word" and toks[i].text == "as":
            i += 1
            if i >= len(toks) or toks[i].kind not in ("word", "qid"):
                return None
            alias = toks[i].text
            i += 1
        elif i < len(toks) and toks[i].kind in ("word", "qid") and toks[i].text != "from":
            alias = toks[i].text
            i += 1
        items.append(_Item(name, tuple(args), alias))
        if i < len(toks) and toks[i].raw == ",":
            i += 1
            continue
        if i < len(toks) and toks[i].raw == ";":
            i += 1
        return items if i == len(toks) else None


def _arg(t: Token, params: list) -> str | None:
    if t.kind == "param":
        k = int(t.text[1:]) - 1
        if params is None or k >= len(params):
            raise SqlError(f"there is no parameter {t.text}", "42P02", t.pos + 1)
        v = params[k]
        return None if v is None else str(v)
    if t.kind == "word":
        return None if t.text == "null" else t.text
    return t.text


def _call(item: _Item, params: list, ctx: Context) -> object:
    f = item.func.removeprefix("pg_catalog.")
    match f:
        case "version":
            return VERSION
        case "current_schema":
            return "public"
        case "current_database" | "current_catalog":
            return ctx.database
        case "current_user" | "session_user" | "user":
            return ctx.user
        case "pg_backend_pid":
            return ctx.pid
        case "current_setting":
            name = _arg(item.args[0], params)
            v = ctx.settings.get(name or "")
            if v is None:
                raise SqlError(f'unrecognized configuration parameter "{name}"', "42704")
            return v
        case "set_config":
            name, value = _arg(item.args[0], params), _arg(item.args[1], params)
            ctx.settings.set(name or "", value or "")
            return ctx.settings.get(name or "")
        case "pg_advisory_unlock_all":
            return ""
    raise AssertionError(f)


# a cheap test every SELECT goes through before anything is tokenized
_MAYBE = re.compile(r"version|current_|session_user|\buser\b|pg_backend_pid|set_config|"
                    r"pg_advisory|to_regtype", re.IGNORECASE)


_UNLISTEN = "unlisten"


def _candidate(sql: str):
    """`_UNLISTEN`, the tokens of a SELECT this module may answer, or None (not ours)."""
    head = sql.lstrip()[:16].lower()
    if head.startswith("unlisten"):
        return _UNLISTEN
    if not head.startswith("select") or _MAYBE.search(sql) is None:
        return None
    try:
        return tokenize(sql)
    except LexError:
        return None


def answer(sql: str, params: list | None, ctx: Context) -> StatementResult | None:
    toks = _candidate(sql)
    if toks is _UNLISTEN:
        return StatementResult("UNLISTEN")
    if toks is None:
        return None
    items = _parse_select(toks)
    if items is not None:
        cols = {}
        for k, it in enumerate(items):
            name, typ = _FUNCS[it.func][0], _FUNCS[it.func][1]
            col = it.alias or name
            while col in cols:
                col += "_"
            cols[col] = pa.array([_call(it, params or [], ctx)], typ)
        return StatementResult.rows("SELECT", pa.table(cols))
    norm = " ".join(t.raw.lower() if t.kind in ("word", "op", "num") else t.raw for t in toks)
    if _TYPEINFO.match(norm):
        return StatementResult.rows("SELECT", pa.table({
            "name": pa.array([], pa.string()), "oid": pa.array([], pa.int64()),
            "array_oid": pa.array([], pa.int64()), "regtype": pa.array([], pa.string()),
            "delimiter": pa.array([], pa.string())}))
    return None


def describe(sql: str, ctx: Context) -> tuple[list, pa.Schema] | None:
    """(parameter types, result schema) of a statement `answer` handles, else None."""
    toks = _candidate(sql)
    if toks is _UNLISTEN:
        return [], None
    if toks is None:
        return None
    nparams = max((int(t.text[1:]) for t in toks if t.kind == "param"), default=0)
    items = _parse_select(toks)
    if items is not None:
        fields = []
        for it in items:
            fields.append(pa.field(it.alias or _FUNCS[it.func][0], _FUNCS[it.func][1]))
        return [pa.string()] * nparams, pa.schema(fields)
    r = answer(sql, [None] * nparams, ctx)
    return ([pa.string()] * nparams, r.table.schema) if r is not None else None
