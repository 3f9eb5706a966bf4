"""Postgres v3 wire-protocol server: real PostgreSQL clients (psql, asyncpg, psycopg 3,
SQLAlchemy, JDBC) talk to kudusql unmodified. Imports `session`, `planner`, `engine`;
nothing below imports it; it reads no SQL (the session's front door parses every
statement). Design note: docs/wire.md.

    protocol     the codec: frontend bytes -> messages, backend messages -> bytes (no I/O)
    types        OIDs, Arrow <-> OID, whole-column text/binary encoders, DataRow batches,
                 parameter decoders
    settings     SET / RESET / SHOW and ParameterStatus (GUCs); SERVER_VERSION
    transaction  I / T / E status, BEGIN / COMMIT / ROLLBACK / SAVEPOINT
    portal       prepared statements, portals, DECLARE / FETCH / CLOSE cursors
    copy         COPY FROM STDIN / TO STDOUT in text, csv and binary
    auth         users.json, trust / cleartext / md5 / SCRAM-SHA-256, CREATE/ALTER/DROP USER
    pg_catalog   PostgreSQL's system catalogs as views over the engine catalog, and the
                 session functions (version(), current_setting(), set_config(), ...)
    connection   one client: the message flow around one Session (asyncio)
    server       listener, connection limit, cancel keys, thread pool; `serve()` for the CLI
"""
