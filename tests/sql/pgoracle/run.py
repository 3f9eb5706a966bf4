"""Run the corpus on one DB-API connection (PostgreSQL through psycopg, kudusql embedded
or through psycopg over the wire) and collect each statement's answer (values.py)."""

from __future__ import annotations

from .corpus import SETUP, STATEMENTS
from .corpus_text import STATEMENTS as TEXT_STATEMENTS, TEXT_TYPES
from .values import canon_rows


def answer(cur, sql: str, errors: type[Exception]) -> dict:
    try:
        cur.execute(sql)
    except errors as e:
        return {"error": getattr(e, "sqlstate", None) or "?????",
                "message": str(e).splitlines()[0] if str(e) else ""}
    if cur.description is None:
        return {"rowcount": cur.rowcount}
    return {"rows": canon_rows(cur.fetchall())}


def run_corpus(conn, errors: type[Exception]) -> dict[str, dict]:
    """SETUP (each statement must succeed), then every statement in order."""
    cur = conn.cursor()
    for sql in SETUP:
        cur.execute(sql)
    return {name: answer(cur, sql, errors) for name, sql in STATEMENTS}


def run_text(conn, errors: type[Exception]) -> dict[str, dict]:
    """corpus_text.py on a psycopg connection: its TEXT_TYPES columns read as the text the
    server sent (the connection's loaders for them are replaced)."""
    from psycopg.types.string import TextLoader

    for name in TEXT_TYPES:
        conn.adapters.register_loader(name, TextLoader)
    cur = conn.cursor()
    out = {}
    for name, sql in TEXT_STATEMENTS:
        out[name] = answer(cur, sql, errors)
        if name.startswith("text_tz_s"):       # SET / SHOW: what ParameterStatus said
            out[name]["TimeZone"] = conn.info.parameter_status("TimeZone")
    return out
