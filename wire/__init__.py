"""Postgres v3 wire-protocol server: real PostgreSQL clients (psql, asyncpg, psycopg 3,
SQLAlchemy, JDBC) talk to kudusql unmodified. Imports `session`, `planner`, `engine`;
nothing below imports it; it reads no SQL (the session's front door parses every
statement). Design note: docs/wire.md.

    protocol     the codec: frontend bytes -> messages, backend messages -> bytes (no I/O)
    types        the face of the type codecs: type_oids (OIDs, Arrow <-> OID), text_codec
                 and binary_codec (whole-column encoders), datarows (DataRow batches),
                 params (parameter decoders)
    settings     SET / RESET / SHOW and ParameterStatus (GUCs); SERVER_VERSION
    transaction  I / T / E status, BEGIN / COMMIT / ROLLBACK / SAVEPOINT
    portal       prepared statements, portals, DECLARE / FETCH / CLOSE cursors
    copy         COPY's text, csv and binary formats (rows in, rows out)
    auth         users.json, trust / cleartext / md5 / SCRAM-SHA-256, CREATE/ALTER/DROP USER
    pg_catalog/  PostgreSQL's system catalogs as views over the engine catalog, and the
                 session functions (version(), current_setting(), set_config(), ...)
    backend      the protocol core, sans-I/O: `Backend.handle(message)` -> bytes + effects
                 (effects); its parts: startup, simple_query, extended_query, results (rows
                 out, back-pressure), copy_flow (the COPY sub-protocols)
    connection   the asyncio adapter: socket <-> decoder <-> Backend, performs the effects
    fastpath     Bind fast paths: point reads, pipelined INSERT batches (on the adapter)
    server       listener, connection limit, cancel keys, thread pool; `serve()` for the CLI
"""
