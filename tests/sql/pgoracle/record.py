"""Record PostgreSQL's answers to the corpus into expected.json.

    python -m tests.sql.pgoracle.record --dsn postgresql://postgres@127.0.0.1:55432/postgres

The DSN names a server the recorder may create and drop a database `kudusql_oracle` on.
The answers were recorded from PostgreSQL 15 (Debian's postgresql-15); to start one as a
non-root user (PostgreSQL refuses to run as root):

    /usr/lib/postgresql/15/bin/initdb -D DIR -U postgres --auth=trust -E UTF8
    /usr/lib/postgresql/15/bin/pg_ctl -D DIR -l DIR/log -o "-p 55432 \
        -c listen_addresses=127.0.0.1 -k DIR -c TimeZone=UTC" start

Re-record after adding or changing statements in corpus.py; the test refuses a recording
that does not match the corpus.
"""

from __future__ import annotations

import argparse
import json
import pathlib

EXPECTED = pathlib.Path(__file__).with_name("expected.json")
EXPECTED_TEXT = pathlib.Path(__file__).with_name("expected_text.json")   # corpus_text.py


def main(argv=None) -> None:
    import psycopg

    from .corpus import STATEMENTS
    from .corpus_text import STATEMENTS as TEXT_STATEMENTS
    from .run import run_corpus, run_text

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", required=True, help="a PostgreSQL 15 server (libpq DSN)")
    ap.add_argument("--database", default="kudusql_oracle",
                    help="the scratch database created (and dropped first) for the run")
    args = ap.parse_args(argv)
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {args.database}")
        # C.UTF-8: byte order for text (as kudusql sorts) and Unicode case mapping
        # (upper('Zoë') is 'ZOË'); the answers do not depend on the server's default locale
        admin.execute(f"CREATE DATABASE {args.database} TEMPLATE template0 ENCODING 'UTF8' "
                      "LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'")
        version = admin.execute("SHOW server_version").fetchone()[0]
    info = psycopg.conninfo.conninfo_to_dict(args.dsn)
    info["dbname"] = args.database
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        answers = run_corpus(conn, psycopg.Error)
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        text_answers = run_text(conn, psycopg.Error)
    sql = dict(STATEMENTS)
    out = {"postgresql": version,
           "statements": {name: {"sql": sql[name], **a} for name, a in answers.items()}}
    EXPECTED.write_text(_dump(out))
    text_sql = dict(TEXT_STATEMENTS)
    EXPECTED_TEXT.write_text(_dump({"postgresql": version, "statements": {
        name: {"sql": text_sql[name], **a} for name, a in text_answers.items()}}))
    errors = sum("error" in a for a in answers.values())
    print(f"{len(answers)} statements recorded from PostgreSQL {version} "
          f"({errors} errors) -> {EXPECTED}")


def _dump(out: dict) -> str:
    """JSON with one line per statement (diffs of a re-recording read statement by
    statement)."""
    lines = [f'{{"postgresql": {json.dumps(out["postgresql"])}, "statements": {{']
    items = list(out["statements"].items())
    for i, (name, answer) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f" {json.dumps(name)}: {json.dumps(answer, ensure_ascii=False)}{comma}")
    return "\n".join(lines) + "\n}}\n"


if __name__ == "__main__":
    main()
