"""pg_settings, SHOW and current_setting agree, and follow SET / RESET as in PostgreSQL 15.

The expected rows were recorded from PostgreSQL 15.18 (initdb'ed in a temp dir, psycopg,
the same statements; the way bench/wire_bench.py starts it): after SET a row's `source` is
'session', for a value from the StartupMessage (libpq `options=-c ...`) 'client' with that
value as `reset_val`, transaction_read_only is 'override'; `setting` holds time settings in
ms (unit 'ms') while SHOW and current_setting print '5s'; RESET returns to the startup
value and its source.
"""

from __future__ import annotations

import psycopg

Q = ("SELECT name, setting, unit, source, reset_val FROM pg_settings "
     "WHERE name IN ('statement_timeout', 'extra_float_digits') ORDER BY name")


def _connect(server, **kw):
    return psycopg.connect(host="127.0.0.1", port=server.thread.port, user="kudusql",
                           dbname="kudusql", autocommit=True, **kw)


def test_set_and_reset_as_postgres_shows_them(server):
    with _connect(server, options="-c statement_timeout=1s -c extra_float_digits=0") as c:
        efd = ("extra_float_digits", "0", None, "client", "0")
        assert c.execute(Q).fetchall() == [efd, ("statement_timeout", "1000", "ms", "client",
                                                 "1000")]
        c.execute("SET statement_timeout = '2s'")
        assert c.execute(Q).fetchall() == [efd, ("statement_timeout", "2000", "ms", "session",
                                                 "1000")]
        assert c.execute("SELECT current_setting('statement_timeout'), "
                         "set_config('lock_timeout', '3s', false), "
                         "current_setting('lock_timeout')").fetchall() == [("2s", "3s", "3s")]
        c.execute("RESET statement_timeout")
        assert c.execute(Q).fetchall() == [efd, ("statement_timeout", "1000", "ms", "client",
                                                 "1000")]
        c.execute("SET statement_timeout = 0")
        assert c.execute(Q).fetchall() == [efd, ("statement_timeout", "0", "ms", "session",
                                                 "1000")]
        c.execute("RESET ALL")
        assert c.execute(Q).fetchall() == [efd, ("statement_timeout", "1000", "ms", "client",
                                                 "1000")]


def test_defaults_and_override(server):
    with _connect(server) as c:
        c.execute("SET statement_timeout = '5s'")
        c.execute("SET application_name = 'x'")
        rows = c.execute(
            "SELECT name, setting, unit, source, reset_val FROM pg_settings WHERE name IN "
            "('statement_timeout', 'extra_float_digits', 'application_name', "
            "'default_transaction_read_only', 'transaction_read_only') ORDER BY name"
        ).fetchall()
        assert rows == [("application_name", "x", None, "session", ""),
                        ("default_transaction_read_only", "off", None, "default", "off"),
                        ("extra_float_digits", "1", None, "default", "1"),
                        ("statement_timeout", "5000", "ms", "session", "0"),
                        ("transaction_read_only", "off", None, "override", "off")]
        assert c.execute("SELECT current_setting('statement_timeout'), "
                         "current_setting('extra_float_digits')").fetchall() == [("5s", "1")]


def test_every_setting_agrees_with_show(server):
    """Every name SHOW ALL lists is a pg_settings row, and current_setting gives what SHOW
    gives, after SETs of every kind."""
    with _connect(server) as c:
        for sql in ("SET statement_timeout = '90s'", "SET lock_timeout = 250",
                    "SET search_path = a, b", "SET query_mem_limit = '512MB'",
                    "SET extra_float_digits = 3", "BEGIN READ ONLY"):
            c.execute(sql)
        shown = {r[0]: r[1] for r in c.execute("SHOW ALL").fetchall()}
        rows = dict(c.execute("SELECT name, setting FROM pg_settings").fetchall())
        assert set(shown) <= set(rows), set(shown) - set(rows)
        for name, value in shown.items():
            got = c.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]
            assert got == value, (name, got, value)
            if name not in ("statement_timeout", "lock_timeout",
                            "idle_in_transaction_session_timeout"):
                assert rows[name] == value, (name, rows[name], value)
        assert rows["statement_timeout"] == "90000" and shown["statement_timeout"] == "90s"
        assert rows["transaction_read_only"] == "on"
        c.execute("COMMIT")
