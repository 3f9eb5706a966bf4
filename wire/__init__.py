"""Postgres v3 wire-protocol server: real PostgreSQL clients (psql, asyncpg, psycopg 3,
SQLAlchemy, JDBC) talk to kudusql unmodified. Imports `session`, `planner`, `engine`;
nothing below imports it; it reads no SQL (the session's front door parses every
statement). Design note: docs/wire.md.

    protocol     the codec: the frame scanner, frontend frames -> messages (or a Bind's
                 fields, no object), backend messages -> bytes (no I/O)
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
    backend      the protocol core, sans-I/O: owns the receive buffer (`feed`,
                 `handle_next`), `Backend.handle(message)` -> bytes + effects (effects);
                 its parts: startup, simple_query, extended_query, results (rows out,
                 back-pressure), copy_flow (the COPY sub-protocols), fastpath
    fastpath     the core's hot cases, read from the receive buffer: prepared point reads
                 and key writes, pipelined INSERT batches
    connection   the asyncio Protocol: socket -> Backend.feed, performs the effects
    server       listener, connection limit, cancel keys, thread pool; `serve()` for the CLI
"""
